#!/usr/bin/env python3
"""How many tokens each tokenizer family makes of what spark's estimate counts as one (src/code/tokens.h), on real
prompts: the default-mode prompts of a corpus (bench/spark_prompt_tokens --dump, leave-one-out, nothing cut), counted
by llama.cpp's real llama-server (POST /tokenize) loaded with a tiny model carrying each family's tokenizer
(scripts/tiny_gguf.py with llama.cpp's own vocabulary files). The ratios are what tokens_per_estimate() uses
(docs/LLM.md, "Token estimate").

    bench/token_ratio.py BUILD CASES.jsonl... [--vocab gpt-2,llama-spm,...]

Needs the cache of scripts/llm_server.sh build (the server, the vocabularies, gguf-py). Prints a Markdown table per
vocabulary: prompts, median, 90th percentile and largest ratio, and the ratio of the corpus's summed tokens.
"""
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCABS = ["gpt-2", "gpt-neox", "starcoder", "llama-spm", "phi-3", "llama-bpe", "qwen2", "deepseek-coder",
          "deepseek-llm", "command-r", "gemma-4"]


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def main():
    args = [a for a in sys.argv[1:]]
    vocabs = VOCABS
    if "--vocab" in args:
        i = args.index("--vocab")
        vocabs = args[i + 1].split(",")
        del args[i:i + 2]
    if len(args) < 2:
        sys.exit(__doc__)
    build, corpora = args[0], args[1:]
    cache = subprocess.run([os.path.join(SOURCE, "scripts", "llm_server.sh"), "path"], capture_output=True,
                           text=True).stdout.strip()
    if not cache or not os.path.isdir(os.path.join(cache, "src", "models")):
        sys.exit("no llama-server cache with vocabularies: scripts/llm_server.sh build")
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "prompts")
        r = subprocess.run([os.path.join(build, "bench", "spark_prompt_tokens"), "--context", "100000000", "--dump",
                            dump, *corpora], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("spark_prompt_tokens: " + r.stderr)
        rows = []
        with open(os.path.join(dump, "index.tsv")) as f:
            for line in f:
                n, case_id, project, estimate = line.rstrip("\n").split("\t")
                with open(os.path.join(dump, n + ".txt")) as p:
                    rows.append((case_id, project, int(estimate), p.read()))
        print("# tokens per estimated token, %d default-mode prompts of %s (estimate: %d tokens in all)\n" %
              (len(rows), ", ".join(corpora), sum(r[2] for r in rows)))
        print("| vocabulary | prompts | median | p90 | max | summed tokens / summed estimate |")
        print("|---|---:|---:|---:|---:|---:|")
        for vocab in vocabs:
            model = os.path.join(tmp, vocab + ".gguf")
            made = subprocess.run(["/usr/bin/python3", os.path.join(SOURCE, "scripts", "tiny_gguf.py"),
                                   os.path.join(cache, "src"), model, vocab], capture_output=True, text=True)
            if made.returncode != 0:
                print("| %s | model not made: %s |" % (vocab, made.stderr.strip().splitlines()[-1:]))
                continue
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            log = open(os.path.join(tmp, vocab + ".log"), "w")
            server = subprocess.Popen([os.path.join(cache, "bin", "llama-server"), "-m", model, "--host", "127.0.0.1",
                                       "--port", str(port), "--offline", "--no-webui", "-c", "2048", "-t", "1"],
                                      stdout=log, stderr=subprocess.STDOUT)
            try:
                url = "http://127.0.0.1:%d" % port
                for _ in range(600):
                    try:
                        with urllib.request.urlopen(url + "/health", timeout=2) as h:
                            if h.status == 200:
                                break
                    except OSError:
                        time.sleep(0.1)
                ratios, tokens = [], 0
                for _, _, estimate, text in rows:
                    n = len(post(url + "/tokenize", {"content": text, "add_special": False})["tokens"])
                    ratios.append(n / max(1, estimate))
                    tokens += n
                ratios.sort()
                print("| %s | %d | %.3f | %.3f | %.3f | %.3f |" % (
                    vocab, len(ratios), statistics.median(ratios), ratios[int(0.9 * (len(ratios) - 1))], ratios[-1],
                    tokens / max(1, sum(r[2] for r in rows))))
                sys.stdout.flush()
            finally:
                server.terminate()
                server.wait()
                log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
