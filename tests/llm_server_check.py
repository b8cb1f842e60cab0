#!/usr/bin/env python3
"""spark against a real LLM server: llama.cpp's own `llama-server` with a tiny generated model (scripts/llm_server.sh
builds and caches both). The model's text is gibberish; the server (HTTP, its tokenizer, its context limit, JSON-schema
grammars, embeddings) is the real one, and what it does differently from our scripted test server is what this checks:

- every LLM mode of `spark localize`, with structured answers (the line ids an enum of the lines shown: every answer
  names real lines) and with free-text answers (--no-structured: parsed, or the fallback named);
- the server's context learnt from GET /props and prompts counted with POST /tokenize, so a long test is cut to fit
  and never refused; with --no-probe the server's HTTP 400 refusal is read, the prompt cut to the numbers it gave and
  asked once more;
- many failures at once with more requests in flight than the server has slots; the server killed mid-run (the rest
  fall back to the built-in ranker, each saying why); redaction on the wire (the server's own log of what it got);
- `spark eval --mode default` on the demo's corpus (and on 20 cases of ../shared/data/dev where it is present);
- the embeddings client against the server's /v1/embeddings.

Usage: llm_server_check.py SPARK_BINARY     Exit 77 (skipped) when the cached server is absent.
"""

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"
SECRET = "ghp_" + "Zq3" * 12  # a GitHub token's form, planted in the test code


def cache_dir():
    cache = os.environ.get("SPARK_LLM_SERVER_CACHE")
    if not cache:
        r = subprocess.run([os.path.join(SOURCE, "scripts", "llm_server.sh"), "path"], capture_output=True, text=True)
        cache = r.stdout.strip() if r.returncode == 0 else ""
    if not cache or not os.path.isfile(os.path.join(cache, ".complete")):
        print("skipped: no cached llama-server (scripts/llm_server.sh build makes it; scripts/llm_server.sh test "
              "builds it and runs this check)")
        sys.exit(77)
    return cache


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """llama-server on loopback; its stderr (the log) kept in a file."""

    def __init__(self, cache, tmp, name, *args):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log_path = os.path.join(tmp, name + ".log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [os.path.join(cache, "bin", "llama-server"), "-m", os.path.join(cache, "tiny.gguf"), "--host", "127.0.0.1",
             "--port", str(self.port), "--offline", "--no-webui", "-t", "1", *args],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                sys.exit("llama-server exited at start:\n" + open(self.log_path).read()[-3000:])
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        sys.exit("llama-server did not become ready in 60 s:\n" + open(self.log_path).read()[-3000:])

    def logged(self):
        self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


failures = []


def check(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
        if detail:
            print("     " + detail.replace("\n", "\n     ")[:4000])


def spark_run(spark, args, env, cwd, timeout=600):
    return subprocess.run([spark, *args], cwd=cwd, env=env, capture_output=True, text=True, errors="replace",
                          timeout=timeout)


def documents(stdout):
    j = json.loads(stdout)
    return j if isinstance(j, list) else [j]


def shown_lines(prompt):
    """The line ids a prompt shows ("12: code")."""
    ids = set()
    for line in prompt.splitlines():
        head = line.split(":", 1)[0]
        if head.isdigit():
            ids.add(int(head))
    return ids


def main():
    spark = os.path.abspath(sys.argv[1])
    cache = cache_dir()
    with tempfile.TemporaryDirectory() as tmp:
        demo = os.path.join(tmp, "demo")
        r = subprocess.run([PY, os.path.join(SOURCE, "scripts", "demo_corpus.py"), demo], capture_output=True,
                           text=True)
        if r.returncode != 0:
            sys.exit("demo_corpus.py: " + r.stderr)
        cases = os.path.join(demo, "cases.jsonl")
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "OPENAI_"))}
        env["SPARK_KB"] = os.path.join(tmp, "kb")
        env["XDG_CONFIG_HOME"] = os.path.join(tmp, "config")
        r = spark_run(spark, ["import", cases], env, work)
        if r.returncode != 0:
            sys.exit("spark import: " + r.stderr)
        test = os.path.join(demo, "query", "tests", "test_shapes.py")
        error = os.path.join(demo, "query", "failure.txt")
        # A secret in the test code: redacted before it reaches the server (the server's log shows what it got).
        with open(test) as f:
            code = f.read()
        with open(test, "w") as f:
            f.write(code.rstrip("\n") + "\n\n\ndef test_token_is_read():\n    token = '%s'\n    assert token\n" % SECRET)

        server = Server(cache, tmp, "chat", "-c", "8192", "--parallel", "2", "-v")
        try:
            llm = ["--llm-url", server.url + "/v1", "--model", "tiny-random", "--format", "json"]
            query = ["localize", "--test", test, "--error", error] + llm

            # 1. Every LLM mode, structured: every answer names real, shown lines.
            for mode in ["baseline", "default", "random", "annotation-free", "directive", "naive-rag", "hybrid"]:
                r = spark_run(spark, query + ["--mode", mode, "--show-prompt", "--require-llm"], env, work)
                if r.returncode != 0:
                    check(False, "localize --mode %s against llama-server" % mode, r.stderr)
                    continue
                doc = documents(r.stdout)[0]
                l = doc["llm"]
                ids = [e["line"] for e in doc["ranked"] if e["source"] == "llm"]
                shown = shown_lines(l.get("prompt", ""))
                check(l["used"] and l["structured"] and l["answer"]["format"] == "json" and ids and
                      set(ids) <= shown and not l["tokens"]["estimated"],
                      "--mode %s: a structured answer naming %d shown line(s), tokens counted by the server" %
                      (mode, len(ids)), json.dumps(l)[:2000])
                check(l["context"]["counted"] and "/props" in l["context"]["source"] and l["context"]["tokens"] > 0,
                      "--mode %s: the server's context (%s tokens) read from GET /props, the prompt counted" %
                      (mode, l["context"]["tokens"]), json.dumps(l["context"]))
            check(SECRET not in server.logged() and "[REDACTED:github-token]" in server.logged(),
                  "the planted token never reached the server; its redaction label did (the server's verbose log)")

            # 2. Free text (the paper's answer): parsed, or the fallback named; never an error.
            r = spark_run(spark, query + ["--no-structured"], env, work)
            doc = documents(r.stdout)[0] if r.returncode == 0 else None
            l = doc["llm"] if doc else {}
            check(doc is not None and not l["structured"] and
                  (l["used"] or (l["error"] and len([e for e in doc["ranked"] if e["source"] == "filled"]) > 0)),
                  "--no-structured: the free-text answer parsed (used=%s) or its fallback named (%s)" %
                  (l.get("used"), l.get("error")), r.stderr + r.stdout[:2000])

            # 3. A long test: cut to the server's context by its own count, never refused.
            long_test = os.path.join(demo, "query", "tests", "test_long.py")
            with open(test) as f:
                lines = f.read()
            filler = "".join("\n\ndef test_filler_%d():\n    values = [%s]\n    assert sum(values) == %d\n" %
                             (i, ", ".join(str(i * j) for j in range(12)), sum(i * j for j in range(12)))
                             for i in range(400))
            with open(long_test, "w") as f:
                f.write(lines + filler)
            small = Server(cache, tmp, "small", "-c", "2048", "--parallel", "1")
            try:
                long_query = ["localize", "--test", long_test, "--error", error, "--llm-url", small.url + "/v1",
                              "--model", "tiny-random", "--format", "json", "--require-llm"]
                r = spark_run(spark, long_query, env, work)
                doc = documents(r.stdout)[0] if r.returncode == 0 else None
                l = doc["llm"] if doc else {}
                check(doc is not None and l["used"] and l["code_lines"]["truncated"] and l["context"]["tokens"] == 2048
                      and l["context"]["counted"] and l["tokens"]["prompt"] + 512 <= 2048,
                      "a long test cut to the server's 2048-token context by its own count (%s prompt tokens)" %
                      l.get("tokens", {}).get("prompt"), r.stderr + r.stdout[:2000])
                check("exceed_context_size_error" not in small.logged() and "exceeds the available context" not in
                      small.logged(), "... and the server refused nothing")

                # 4. Without the probe, the server's 400 is read: cut to its numbers, asked once more.
                r = spark_run(spark, long_query + ["--no-probe"], env, work)
                doc = documents(r.stdout)[0] if r.returncode == 0 else None
                l = doc["llm"] if doc else {}
                notes = " ".join(doc.get("notes", [])) if doc else ""
                check(doc is not None and l["used"] and "refused the prompt as too long" in notes and
                      l["context"]["source"].startswith("the server's refusal"),
                      "--no-probe: the server's HTTP 400 (exceed_context_size_error) read, the prompt cut and asked "
                      "once more", r.stderr + r.stdout[:3000])
            finally:
                small.stop()

            # 5. spark eval, default mode, on the demo's corpus: every answer parsed or its fallback named.
            out = os.path.join(tmp, "eval.json")
            r = spark_run(spark, ["eval", cases, "--mode", "default", "-k", "3", "--format", "json", "-o", out,
                                  "--llm-url", server.url + "/v1", "--model", "tiny-random", "--concurrency", "4"],
                          env, work)
            ok = r.returncode == 0
            runs = []
            if ok:
                with open(out) as f:
                    runs = [x for c in json.load(f)["cases"] for x in c["runs"]]
            check(ok and runs and all(x["llm"]["used"] or x["llm"]["error"] for x in runs) and
                  all(x["llm"]["answer_form"] == "structured" for x in runs if x["llm"]["used"]),
                  "spark eval --mode default: %d answers, %d used (structured), the rest with their fallback named" %
                  (len(runs), sum(1 for x in runs if x["llm"]["used"])), r.stderr[-3000:])
            for form in ("dev", "dev-tblong"):
                dev = os.path.join(SOURCE, "..", "shared", "data", form, "boltons", "cases.jsonl")
                if not os.path.isfile(dev):
                    print("note: ../shared/data/%s is absent: its 20 cases are not run" % form)
                    continue
                # 20 real failures (the first 20 of one project's corpus, against that slice).
                with open(dev) as f:
                    head = list(itertools.islice(f, 20))
                slice_path = os.path.join(tmp, form + "20.jsonl")
                with open(slice_path, "w") as f:
                    f.writelines(head)
                r = spark_run(spark, ["eval", slice_path, "--mode", "default", "-k", "5", "--format", "json", "-o",
                                      out, "--llm-url", server.url + "/v1", "--model", "tiny-random",
                                      "--concurrency", "2", "--cache", os.path.join(tmp, form + "-answers.sqlite")],
                              env, work, timeout=1200)
                runs = []
                if r.returncode == 0:
                    with open(out) as f:
                        runs = [x for c in json.load(f)["cases"] for x in c["runs"]]
                check(len(runs) == 20 and all(x["llm"]["used"] or x["llm"]["error"] for x in runs),
                      "spark eval --mode default on 20 %s cases: %d used, %d fell back with the reason named" %
                      (form, sum(1 for x in runs if x["llm"]["used"]), sum(1 for x in runs if not x["llm"]["used"])),
                      r.stderr[-3000:])

            # 6. Many failures at once, more in flight than the server's 2 slots; then the server killed mid-run.
            many = os.path.join(tmp, "many.jsonl")
            with open(cases) as f:
                rows = [json.loads(x) for x in f if x.strip()]
            with open(many, "w") as f:
                for i in range(24):
                    row = dict(rows[i % len(rows)])
                    row["id"] = "%s-again-%d" % (row["id"], i)
                    f.write(json.dumps(row) + "\n")
            r = spark_run(spark, ["localize", "--case", many] + llm + ["--concurrency", "6"], env, work)
            docs = documents(r.stdout) if r.returncode == 0 else []
            check(len(docs) == 24 and all(d["llm"]["used"] for d in docs),
                  "24 failures, 6 requests in flight against 2 slots: all answered", r.stderr[-2000:])

            before = server.logged().count("stop processing")
            proc = subprocess.Popen([spark, "localize", "--case", many] + llm +
                                    ["--concurrency", "1", "--retries", "1", "--retry-delay", "0.1",
                                     "--no-structured", "--max-tokens", "256"],
                                    cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    errors="replace")
            deadline = time.time() + 120
            while time.time() < deadline and server.logged().count("stop processing") < before + 3:
                time.sleep(0.02)
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait()
            stdout, stderr = proc.communicate(timeout=600)
            docs = documents(stdout) if proc.returncode == 0 else []
            answered = [d for d in docs if d["llm"]["tokens"]["answer"] > 0]
            unreached = [d for d in docs if d["llm"]["error"] and server.url in d["llm"]["error"]]
            check(proc.returncode == 0 and len(docs) == 24 and answered and unreached and
                  all(len(d["ranked"]) == 5 for d in docs),
                  "the server killed mid-run: exit 0, %d answered before, %d ranked by the built-in ranker with the "
                  "endpoint named" % (len(answered), len(unreached)), stderr[-2000:])
        finally:
            server.stop()

        # 7. The embeddings client against the server's /v1/embeddings.
        # llama-server embeds an input in one physical batch: -b and -ub twice spark's chunks (8192 of its tokens).
        # (Its log does not show the inputs, even with -v: redaction of embedded texts is checked in-process, by
        # tests/secrets_test.cpp.)
        embed = Server(cache, tmp, "embed", "--embeddings", "--pooling", "mean", "-c", "16384", "-b", "16384", "-ub",
                       "16384")
        try:
            eenv = dict(env, SPARK_EMBED_BASE_URL=embed.url + "/v1", SPARK_EMBED_MODEL="tiny-random")
            r = spark_run(spark, ["index", "--rebuild", "--embedder", "openai"], eenv, work)
            check(r.returncode == 0, "spark index --embedder openai against llama-server --embeddings", r.stderr)
            r = spark_run(spark, ["localize", "--test", test, "--error", error, "--format", "json"], eenv, work)
            doc = documents(r.stdout)[0] if r.returncode == 0 else None
            check(doc is not None and doc["retrieved"] and len(doc["ranked"]) == 5,
                  "spark localize retrieves with the server's embeddings (%d retrieved)" %
                  (len(doc["retrieved"]) if doc else 0), r.stderr)
        finally:
            embed.stop()

    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
