#!/usr/bin/env python3
"""`spark audit serve` clicked through in real browsers: headless Chromium driven by Selenium (Debian's chromium,
chromium-driver and python3-selenium; scripts/setup.sh --tests installs them).

Makes a real git repository whose history holds forty one-line test fixes and three forty-line rewrites, mines it
(`spark mine --outcomes`: the rewrites go to the quarantine), serves the audit, and in the browser accepts one
rewrite, trims another to two ticked lines and rejects the third, while a second browser, shown the same case
before the reject, tries to accept it and is told it was decided meanwhile. Then checks the store with
`spark audit list --all --format json`, that test code and messages holding HTML are shown as text, that a page loads
nothing from elsewhere and logs no error, and that requests without the token, with a wrong method, a forged Origin
or Host, or an unknown case id are refused; a second server on the same port fails with a clear error.

Usage: audit_browser_check.py SPARK_BINARY      exit 0 when every check passes, 1 otherwise, 77 when the browser or
                                                Selenium is not installed (ctest counts it skipped)
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

SKIP = 77
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    print("python3-selenium is not installed (scripts/setup.sh --tests installs it)")
    sys.exit(SKIP)

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
failures = []


def check(condition, what, detail=""):
    if not condition:
        failures.append(what + ("\n" + str(detail)[:600] if detail else ""))
    return condition


def run(command, cwd, **kw):
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, errors="replace", **kw)


def git(repo, *args, day=1):
    date = "2026-02-%02dT12:00:00Z" % min(day, 28) if day <= 28 else "2026-03-%02dT12:00:00Z" % (day - 28)
    env = dict(os.environ, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x",
               GIT_COMMITTER_NAME="Tess Tester", GIT_COMMITTER_EMAIL="tess@example.com")
    r = run(["git", *args], repo, env=env)
    if r.returncode != 0:
        sys.exit("git %s: %s" % (" ".join(args), r.stderr))
    return r.stdout.strip()


def make_history(repo):
    """Forty one-line fixes, then three forty-line rewrites; returns the outcomes as JSON lines."""
    git(repo, "init", "-q")
    git(repo, "config", "user.name", "Tess Tester")
    git(repo, "config", "user.email", "tess@example.com")
    lines = ["def test_%d():\n    assert 1 == 1\n" % i for i in range(43)]
    # HTML in the test code and in a message: shown as text, never as markup.
    body = ["value_%d = %d\n" % (i, i) for i in range(60)]
    body[0] = "value_0 = '<script>document.title=\"pwned\"</script>'\n"

    def content():
        return "".join(body) + "\n" + "\n".join(lines)

    os.makedirs(os.path.join(repo, "tests"))
    path = os.path.join(repo, "tests", "test_m.py")
    with open(path, "w") as f:
        f.write(content())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base", day=1)
    outcomes = []
    for n in range(43):
        size = 1 if n < 40 else 40
        test = "tests/test_m.py::test_%d" % n
        message = "E   assert <b>%d</b> == 0" % n if n == 40 else "E   boom %d" % n
        outcomes.append({"commit": git(repo, "rev-parse", "HEAD"), "test_id": test, "outcome": "failed",
                         "message": message})
        for i in range(size):
            body[(n + i) % 60 if size == 1 else i] = body[(n + i) % 60 if size == 1 else i].replace(" = ", " = 1 + ", 1)
        with open(path, "w") as f:
            f.write(content())
        git(repo, "commit", "-q", "-am", "fix %d" % n, day=2 + n % 50)
        outcomes.append({"commit": git(repo, "rev-parse", "HEAD"), "test_id": test, "outcome": "passed"})
    return "".join(json.dumps(o) + "\n" for o in outcomes)


def http(url, method="GET", data=None, headers=None):
    """(status, body) of one request, whatever the status."""
    request = urllib.request.Request(url, method=method, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=20) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
              "--window-size=1400,1000"):
        options.add_argument(a)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(DRIVER), options=options)


def click(driver, element):
    """Clicks and waits for the page it leads to; returns that page's text."""
    before = driver.execute_script("return performance.timeOrigin")

    def loaded(d):
        try:
            return d.execute_script("return document.readyState == 'complete' && performance.timeOrigin != " +
                                    repr(before))
        except WebDriverException:  # between the two pages
            return False

    element.click()
    WebDriverWait(driver, 30).until(loaded)
    return driver.find_element(By.TAG_NAME, "body").text


def stored(spark, repo):
    r = run([spark, "audit", "list", "--all", "--format", "json"], repo)
    check(r.returncode == 0, "audit list --all --format json", r.stderr)
    return {c["id"]: c for c in json.loads(r.stdout)["cases"]} if r.returncode == 0 else {}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    spark = os.path.abspath(sys.argv[1])
    if not CHROMIUM or not DRIVER:
        print("chromium or chromedriver is not installed (scripts/setup.sh --tests installs them)")
        return SKIP
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        os.makedirs(repo)
        with open(os.path.join(tmp, "outcomes.jsonl"), "w") as f:
            f.write(make_history(repo))
        r = run([spark, "mine", "--outcomes", os.path.join(tmp, "outcomes.jsonl")], repo)
        if not check(r.returncode == 0 and "3 quarantined for audit" in r.stderr, "mining quarantines the rewrites",
                     r.stderr):
            return 1
        cases = stored(spark, repo)
        quarantined = sorted(i for i, c in cases.items() if c["status"] == "quarantined")
        test_ids = {i: c["test_id"] for i, c in cases.items()}
        check(len(quarantined) == 3, "three quarantined cases", quarantined)

        server = subprocess.Popen([spark, "audit", "serve", "--port", "0"], cwd=repo, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        drivers = []
        try:
            url = server.stdout.readline().strip()
            if not check(url.startswith("http://127.0.0.1:") and url.endswith("/"), "serve prints its address", url):
                return 1
            parsed = urllib.parse.urlsplit(url)
            origin, token = "%s://%s" % (parsed.scheme, parsed.netloc), parsed.path.strip("/")
            check(len(token) == 32, "the address carries a 32-digit token", url)
            accept_id, trim_id, reject_id = quarantined

            a, b = browser(), browser()
            drivers += [a, b]
            # The quarantine: every case, and the rule that put it there.
            a.get(url)
            page = a.find_element(By.TAG_NAME, "body").text
            check("Quarantine: 3 cases" in page and "sd" in page and all(i in page for i in quarantined),
                  "the index lists the quarantine and the rule", page)
            # A message holding HTML: shown as text.
            (html_id,) = [i for i in quarantined if test_ids[i].endswith("::test_40")]
            a.get(url + "case/" + html_id)
            check("assert <b>40</b> == 0" in a.find_element(By.TAG_NAME, "body").text and
                  not a.find_elements(By.CSS_SELECTOR, "pre b"), "a message holding HTML is shown as text")
            a.get(url)
            # Accept.
            check("why quarantined" in click(a, a.find_element(By.LINK_TEXT, accept_id)),
                  "a case page says why it is there")
            check(len(a.find_elements(By.CSS_SELECTOR, "td.faulty")) == 40, "the 40 faulty lines are outlined",
                  len(a.find_elements(By.CSS_SELECTOR, "td.faulty")))
            check(a.title != "pwned" and not a.find_elements(By.TAG_NAME, "script"),
                  "test code holding <script> is shown as text")
            check("<script>document.title" in a.find_element(By.TAG_NAME, "body").text,
                  "the <script> of the test code is readable on the page")
            text = click(a, a.find_element(By.ID, "accept"))
            check("accepted by Tess Tester" in text, "accepting says so", text[:500])
            # Trim: tick the first two faulty lines.
            a.get(url + "case/" + trim_id)
            boxes = a.find_elements(By.CSS_SELECTOR, "input[type=checkbox][name=keep]")
            check(len(boxes) == 40 and not any(x.is_selected() for x in boxes), "a checkbox per mined line, none ticked",
                  len(boxes))
            for box in boxes[:2]:
                box.click()
            text = click(a, a.find_element(By.ID, "trim-button"))
            check("trimmed by Tess Tester" in text and "with 2 faulty lines" in text, "trimming says so", text[:500])
            check(len(a.find_elements(By.CSS_SELECTOR, "input[name=keep]:checked")) == 2,
                  "the trimmed case shows its two kept lines ticked")
            # Two browsers on one case: a rejects, b (shown it before) accepts and is told.
            a.get(url + "case/" + reject_id)
            b.get(url + "case/" + reject_id)
            forms = a.find_elements(By.CSS_SELECTOR, "form.decide")
            forms[2].find_element(By.NAME, "reason").send_keys("a refactoring, not a fault")
            check("rejected by Tess Tester" in click(a, a.find_element(By.ID, "reject")), "rejecting says so")
            told = click(b, b.find_element(By.ID, "accept"))
            check("Already decided" in told and "rejected by Tess Tester" in told and "nothing was changed" in told,
                  "the second browser is told the case was decided meanwhile", told[:800])
            # Nothing loaded from elsewhere, nothing logged as an error.
            for d in drivers:
                names = d.execute_script("return performance.getEntries().filter(e => e.entryType == 'navigation' || e.entryType == 'resource').map(e => e.name)")
                check(all(n.startswith(origin) for n in names), "pages load only from the server", names)
                severe = [e for e in d.get_log("browser") if e.get("level") == "SEVERE" and "409" not in e["message"]]
                check(not severe, "no error in the browser's console", severe)

            # The store, as the command line sees it.
            cases = stored(spark, repo)
            check(cases.get(accept_id, {}).get("status") == "accepted", "the accept is stored", cases.get(accept_id))
            check(cases.get(trim_id, {}).get("status") == "trimmed" and len(cases[trim_id]["faulty_lines"]) == 2,
                  "the trim is stored with the two ticked lines", cases.get(trim_id))
            check(cases.get(reject_id, {}).get("status") == "rejected" and
                  cases[reject_id].get("reason") == "a refactoring, not a fault", "the reject is stored with its reason",
                  cases.get(reject_id))
            check(all(cases.get(i, {}).get("decided_by") == "Tess Tester <tess@example.com>" for i in quarantined),
                  "decided by the repository's git user", [cases.get(i, {}).get("decided_by") for i in quarantined])

            # Refusals.
            base = origin + "/" + token
            form = urllib.parse.urlencode({"seen": "quarantined"}).encode()
            status, _ = http(origin + "/")
            check(status == 403, "no token: refused", status)
            status, _ = http(origin + "/" + "0" * 32 + "/")
            check(status == 403, "a wrong token: refused", status)
            status, _ = http(base + "/case/" + accept_id + "/accept")
            check(status == 405, "a decision by GET: refused", status)
            status, _ = http(base + "/", method="POST", data=form)
            check(status == 405, "a page by POST: refused", status)
            status, body = http(base + "/case/" + accept_id + "/reject", "POST", form,
                                {"Origin": "http://evil.example", "Content-Type": "application/x-www-form-urlencoded"})
            check(status == 403 and "Origin" in body, "a forged Origin: refused", (status, body))
            status, _ = http(base + "/", headers={"Host": "attacker.example:80"})
            check(status == 403, "a forged Host: refused", status)
            status, body = http(base + "/case/no-such-case")
            check(status == 404, "an unknown case: 404", (status, body))
            status, _ = http(base + "/case/no-such-case/accept", "POST", form,
                             {"Content-Type": "application/x-www-form-urlencoded"})
            check(status == 404, "deciding an unknown case: 404", status)
            check(stored(spark, repo).get(accept_id, {}).get("status") == "accepted", "refused requests changed nothing")
            # The port in use.
            taken = run([spark, "audit", "serve", "--port", str(parsed.port)], repo, timeout=60)
            check(taken.returncode != 0 and "127.0.0.1:%d" % parsed.port in taken.stderr and taken.stdout == "",
                  "a port in use: a clear error", (taken.returncode, taken.stderr))
        finally:
            for d in drivers:
                d.quit()
            server.send_signal(signal.SIGINT)
            try:
                out, err = server.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                out, err = server.communicate()
                check(False, "Ctrl-C stops the server")
        check(server.returncode == 0, "Ctrl-C stops the server cleanly", (server.returncode, err))
    for f in failures:
        print("FAIL:", f)
    print("%s: %d failure(s)" % (os.path.basename(__file__), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
