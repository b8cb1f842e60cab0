#!/usr/bin/env python3
"""`spark audit serve` against hostile local clients: memory against what one client sends, the token holder's
latency against the number of slow and idle clients, and the time SIGTERM takes (docs/PERFORMANCE.md, "The audit
server under hostile clients"). Each binary given is measured the same way, each case on a new server over an empty
knowledge base in a temporary folder; all traffic goes to 127.0.0.1.

    python3 bench/audit_serve_limits.py [SPARK...]           default: build/spark (spark-http.so beside it)
    HEADERS="16 64 200" BODIES="64 256 1000" SLOW="0 8 40" IDLE="0 50 200" python3 bench/audit_serve_limits.py A B

Memory: the server's peak resident set (VmHWM) after one client sent N MB of header lines (100 bytes each, the head
never ended) or an N MB chunked body, minus the peak before. Latency: a browser's GET of the quarantine page while
N clients send a header line each every 1.5 s (never ending their request) or N connections stay open silent; the
median of 3, each waited for 60 s at most. Stop: SIGTERM while one slow client drips, waited for 10 s at most.
"""
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Server:
    def __init__(self, spark, folder):
        kb = os.path.join(folder, "kb")
        subprocess.run([spark, "--kb", kb, "kb", "init"], check=True, stdout=subprocess.DEVNULL)
        self.proc = subprocess.Popen([spark, "--kb", kb, "audit", "serve"], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        url = self.proc.stdout.readline().strip()  # http://127.0.0.1:PORT/TOKEN/
        self.port = int(url.split(":")[2].split("/")[0])
        self.path = url[url.index("/", 7):]

    def peak_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return -1

    def stop(self, wait=10.0):
        """SIGTERM; the seconds until it exited, or None past `wait` (then killed)."""
        start = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(wait)
            return time.monotonic() - start
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def connect(port, timeout=60.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return s


def flood(server, head, piece, megabytes):
    """One client sends `head`, then `piece` repeated up to `megabytes`, until the server stops taking them."""
    block = piece * (65536 // len(piece) + 1)
    s = connect(server.port, timeout=10.0)
    try:
        s.sendall(head)
        sent = 0
        while sent < megabytes << 20:
            s.sendall(block)
            sent += len(block)
        s.recv(100)
    except OSError:
        pass
    finally:
        s.close()


def memory(spark, kind, megabytes):
    with tempfile.TemporaryDirectory() as folder:
        server = Server(spark, folder)
        try:
            before = server.peak_kib()
            if kind == "headers":
                flood(server, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"X-Filler: " + b"a" * 88 + b"\r\n", megabytes)
            else:
                flood(server, b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                      b"10000\r\n" + b"a" * 65536 + b"\r\n", megabytes)
            time.sleep(0.5)
            return (server.peak_kib() - before) / 1024
        finally:
            server.stop()


class Slow:
    """`count` clients that open a request and send one header line each every `every` seconds."""

    def __init__(self, port, count, every):
        self.sockets = []
        for _ in range(count):
            s = connect(port)
            s.sendall(b"GET / HTTP/1.1\r\n")
            self.sockets.append(s)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.drip, args=(every,))
        self.thread.start()

    def drip(self, every):
        n = 0
        while not self.done.wait(every):
            n += 1
            for s in self.sockets:
                try:
                    s.sendall(b"X-Drip: %d\r\n" % n)
                except OSError:
                    pass

    def close(self):
        self.done.set()
        self.thread.join()
        for s in self.sockets:
            s.close()


def page(server, timeout=60.0):
    """Seconds until the whole quarantine page came, or None past `timeout`."""
    start = time.monotonic()
    try:
        s = connect(server.port, timeout)
        s.sendall(b"GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n"
                  % (server.path.encode(), server.port))
        reply = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            reply += chunk
            if b"</html>" in reply:
                break
        s.close()
        return time.monotonic() - start if reply.startswith(b"HTTP/1.1 200") else None
    except OSError:
        return None


def latency(spark, slow, idle):
    with tempfile.TemporaryDirectory() as folder:
        server = Server(spark, folder)
        clients = Slow(server.port, slow, 1.5)
        silent = []
        try:
            for _ in range(idle):
                silent.append(connect(server.port))
            time.sleep(0.3)
            times = []
            for _ in range(3):
                times.append(page(server))
                if times[-1] is None:
                    return None
            return statistics.median(times)
        finally:
            clients.close()
            for s in silent:
                s.close()
            server.stop()


def stop_time(spark):
    with tempfile.TemporaryDirectory() as folder:
        server = Server(spark, folder)
        clients = Slow(server.port, 1, 0.3)
        time.sleep(1.0)
        try:
            return server.stop()
        finally:
            clients.close()


def show(value, unit, fmt, none):
    return none if value is None else fmt.format(value) + unit


def main():
    spark_binaries = [os.path.realpath(b) for b in sys.argv[1:]] or [os.path.join(ROOT, "build", "spark")]
    headers = [int(x) for x in os.environ.get("HEADERS", "16 64 200").split()]
    bodies = [int(x) for x in os.environ.get("BODIES", "64 256 1000").split()]
    slow = [int(x) for x in os.environ.get("SLOW", "0 8 40").split()]
    idle = [int(x) for x in os.environ.get("IDLE", "50 200").split()]
    for spark in spark_binaries:
        print(f"## {spark}")
        print("| sent by one client | peak RSS growth |")
        print("|---|---|")
        for mb in headers:
            print(f"| {mb} MB of header lines | {memory(spark, 'headers', mb):.1f} MiB |", flush=True)
        for mb in bodies:
            print(f"| a {mb} MB chunked body | {memory(spark, 'chunked', mb):.1f} MiB |", flush=True)
        print("| other clients | the token holder's page (median of 3) |")
        print("|---|---|")
        for n in slow:
            print(f"| {n} slow (a header line every 1.5 s) | {show(latency(spark, n, 0), ' s', '{:.3f}', 'none within 60 s')} |",
                  flush=True)
        for n in idle:
            print(f"| {n} idle connections | {show(latency(spark, 0, n), ' s', '{:.3f}', 'none within 60 s')} |", flush=True)
        print(f"| SIGTERM with one slow client | {show(stop_time(spark), ' s to exit', '{:.3f}', 'still serving after 10 s')} |", flush=True)


if __name__ == "__main__":
    main()
