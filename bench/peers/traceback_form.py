"""pytest's long traceback form folded into the short one, as spark reads a failure before embedding it
(canonical_traceback in src/formats/error_message.cpp, ported line for line): CI's JUnit XML holds the long form,
the development corpus the short one, and both should embed alike. Bytes in, bytes out."""
import re

_DIGITS = re.compile(rb"\d+")
_WORDISH = re.compile(rb"[0-9A-Za-z_.]*")


def _split_location(line):
    """(path, number, rest) of "path.py:12..." or "<frozen x>:12...", else None."""
    end = -1
    if line.startswith(b"<"):
        close = line.find(b">:")
        if close >= 0:
            end = close + 1
    else:
        py = line.find(b".py:")
        if py > 0 and not any(c in line[:py] for c in b" \t\""):
            end = py + 3
    if end < 0:
        return None
    m = _DIGITS.match(line, end + 1)
    if not m or len(m.group()) > 9:
        return None
    number = int(m.group())
    return (line[:end], number, line[m.end():]) if number > 0 else None


def _long_location(line):
    loc = _split_location(line)
    if not loc:
        return None
    rest = loc[2]
    if rest in (b"", b":"):
        return loc
    if not rest.startswith(b": "):
        return None
    return loc if _WORDISH.fullmatch(rest[2:]) else None


def _short_frame(line):
    loc = _split_location(line)
    return bool(loc) and loc[2].startswith(b": in ")


def _frame_separator(line):
    t = line.strip(b" \t\r\n\f\v")
    return len(t) >= 5 and all(c == (0x5F if i % 2 == 0 else 0x20) for i, c in enumerate(t))


def _chain_line(line):
    return line in (b"During handling of the above exception, another exception occurred:",
                    b"The above exception was the direct cause of the following exception:")


def _defined_function(code):
    for p in (b"async def ", b"def "):
        if code.startswith(p):
            rest = code[len(p):]
            paren = rest.find(b"(")
            if paren > 0:
                return rest[:paren]
    return b""


def _append_short_frame(out, block, path, number):
    function = b""
    code, errors = [], []
    missing_fixture = False
    for line in block:
        t = line.strip(b" \t\r\n\f\v")
        if line.startswith(b"file ") and b", line " in line and not code:
            missing_fixture = True
        elif line == b"E" or line.startswith(b"E "):
            errors.append(line[1:])
        elif missing_fixture:
            if not code and t:
                code.append(t)
                function = _defined_function(t)
        elif line.startswith(b">"):
            if line[1:].strip(b" \t\r\n\f\v"):
                code.append(line[1:].strip(b" \t\r\n\f\v"))
        elif not code and not function:
            function = _defined_function(t)
    if not function and code and b"lambda" in code[0]:
        function = b"<lambda>"
    out.append(path + b":" + str(number).encode() + b": " + (b"in " + function if function else b"") + b"\n")
    for c in code:
        out.append(b"    " + c + b"\n")
    indent = None
    for e in errors:
        if e.strip(b" \t\r\n\f\v"):
            at = len(e) - len(e.lstrip(b" "))
            indent = at if indent is None else min(indent, at)
    for e in errors:
        out.append(b"E   " + (e[indent:] if indent is not None and len(e) > indent else b"") + b"\n")


def canonical_traceback(message):
    lines = [l[:-1] if l.endswith(b"\r") else l for l in message.split(b"\n")]
    if message.endswith(b"\n"):
        lines.pop()
    if not any(_long_location(l) for l in lines):
        return message
    out = []
    pending = 0

    def write_through(end):
        nonlocal pending
        while pending < end:
            l = lines[pending]
            if l.strip(b" \t\r\n\f\v") and not _frame_separator(l):
                out.append(l + b"\n")
            pending += 1

    for i, l in enumerate(lines):
        loc = _long_location(l)
        if loc:
            _append_short_frame(out, lines[pending:i], loc[0], loc[1])
            pending = i + 1
        elif _frame_separator(l) or _short_frame(l) or _chain_line(l):
            write_through(i)
            if _chain_line(l):
                out.append(b"\n" + l + b"\n")
            if not _short_frame(l):
                pending = i + 1
    write_through(len(lines))
    text = b"".join(out)
    if text and not message.endswith(b"\n"):
        text = text[:-1]
    return text
