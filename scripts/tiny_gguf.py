#!/usr/bin/env python3
"""Writes a tiny GGUF model for llama.cpp's llama-server: the real server in spark's LLM tests (docs/LLM.md).

No trained model can be had on our machines, so this one is made: the llama architecture, 2 layers, width 64, 4 heads,
the GPT-2 vocabulary and merges copied from llama.cpp's own `models/ggml-vocab-gpt-2.gguf`, a ChatML chat template,
and weights drawn from a fixed seed. Its text is gibberish; the server around it (HTTP, tokenizer, context limits,
grammar-constrained JSON, embeddings) is the real one. The same inputs give a byte-identical file.

    tiny_gguf.py LLAMA_CPP_SOURCE_DIR OUT.gguf [VOCAB]

VOCAB (default gpt-2) names another of llama.cpp's vocabulary files, models/ggml-vocab-VOCAB.gguf: its tokenizer is
copied whole (bench/token_ratio.py counts prompts with each family's). Needs gguf-py from that source tree (put on
sys.path here) and Debian's python3-numpy, python3-yaml.
"""
import os
import sys

import numpy as np

CONTEXT = 131072  # what the model claims; the server is started with a smaller -c, as users do
WIDTH, LAYERS, HEADS, FFN = 64, 2, 4, 128
SEED = 20261129
CHATML = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print("usage: tiny_gguf.py LLAMA_CPP_SOURCE_DIR OUT.gguf [VOCAB]", file=sys.stderr)
        return 2
    src, out = sys.argv[1], sys.argv[2]
    vocab_name = sys.argv[3] if len(sys.argv) == 4 else "gpt-2"
    sys.path.insert(0, os.path.join(src, "gguf-py"))
    import gguf  # noqa: E402 (from the llama.cpp source the script is given)

    vocab = gguf.GGUFReader(os.path.join(src, "models", "ggml-vocab-%s.gguf" % vocab_name))

    def field(name):
        return vocab.fields[name].contents()

    tokens = field("tokenizer.ggml.tokens")
    writer = gguf.GGUFWriter(out + ".tmp", "llama")
    writer.add_name("spark-tiny-random")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(WIDTH)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(WIDTH // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    # The tokenizer, every field as the vocabulary file has it (tokens, types, merges or scores, special ids).
    for name, f in vocab.fields.items():
        if not name.startswith("tokenizer.") or name == "tokenizer.chat_template":
            continue
        if name == "tokenizer.ggml.add_bos_token":
            continue
        vtype = f.types[0]
        sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, f.contents(), vtype, sub)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML)

    rng = np.random.default_rng(SEED)

    def matrix(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    # Tied embeddings: no output.weight, the server reuses token_embd for the output (half the file).
    writer.add_tensor("token_embd.weight", matrix(len(tokens), WIDTH))
    writer.add_tensor("output_norm.weight", np.ones(WIDTH, dtype=np.float32))
    for b in range(LAYERS):
        writer.add_tensor(f"blk.{b}.attn_norm.weight", np.ones(WIDTH, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"blk.{b}.{name}.weight", matrix(WIDTH, WIDTH))
        writer.add_tensor(f"blk.{b}.ffn_norm.weight", np.ones(WIDTH, dtype=np.float32))
        writer.add_tensor(f"blk.{b}.ffn_gate.weight", matrix(FFN, WIDTH))
        writer.add_tensor(f"blk.{b}.ffn_up.weight", matrix(FFN, WIDTH))
        writer.add_tensor(f"blk.{b}.ffn_down.weight", matrix(WIDTH, FFN))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(out + ".tmp", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
