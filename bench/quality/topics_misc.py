"""Cross-cutting incidents: git mishaps, Unicode, regular expressions, time, dependencies, shell, formats."""

# Session scripts are transcript text: wrapping their lines would change the messages.
# ruff: noqa: E501

from __future__ import annotations

from bench.quality.incident import Incident

INCIDENTS: tuple[Incident, ...] = (
    Incident(
        key="git-detached-head-reflog",
        cwd="/home/lee/projects/tagger",
        script="""
        U: I made three commits, switched to main, and now they're gone?? git log on my branch doesn't show them
        $ git reflog -8 --format='%h %gd %gs'
        > 4c1d2e7 HEAD@{0} checkout: moving from 9f8e1a2 to main
        > 9f8e1a2 HEAD@{1} commit: tag suggestions from EXIF
        > 71b0c3d HEAD@{2} commit: cache thumbnails
        > 2a9d441 HEAD@{3} commit: add suggestion model
        > e5f6a70 HEAD@{4} checkout: moving from feature/suggest to e5f6a70
        A: You checked out a commit hash (e5f6a70) instead of the branch, which put you in detached HEAD state; the three commits were made on no branch. They still exist and the reflog knows them.
        $ git branch feature/suggest-rescued 9f8e1a2 && git log --oneline -3 feature/suggest-rescued
        > 9f8e1a2 tag suggestions from EXIF
        > 71b0c3d cache thumbnails
        > 2a9d441 add suggestion model
        A: Rescued on feature/suggest-rescued. Unreferenced commits are kept for at least 30 days (gc.reflogExpireUnreachable) so there was no hurry, but good to pin them now.
        """,
        exact="checkout: moving from feature/suggest to e5f6a70",
        paraphrase="several fresh snapshots vanished after hopping to the primary line because they were authored while not on any named line",
        mixed="reflog: several fresh snapshots vanished after hopping to the primary line",
        distractor="""
        U: I ran git reset --hard and lost my uncommitted changes to models.py
        A: Uncommitted changes that were never staged are not in the reflog. If you had run `git add` at some point, `git fsck --lost-found` finds the blobs. Let me check.
        $ git fsck --lost-found | head -2
        > dangling blob 8d1e0c2a...
        A: One dangling blob matches models.py from 20 minutes ago; restored it. Nothing to do with detached HEAD.
        """,
    ),
    Incident(
        key="git-force-push-overwrote",
        cwd="/home/jonas/code/shop-backend",
        script="""
        U: Priya says her two commits on release/2.8 disappeared after my push this morning
        $ git reflog show origin/release/2.8 -3
        > 5e1a9c0 refs/remotes/origin/release/2.8@{0}: update by push
        > b27d441 refs/remotes/origin/release/2.8@{1}: fetch: fast-forward
        A: Your local reflog only knows b27d441 from your last fetch; Priya pushed after that. `git push --force` replaced the remote branch with your rebased version, dropping her commits. Her machine still has them.
        $ git fetch priya && git log --oneline b27d441..priya/release/2.8
        > c81f0e2 fix VAT rounding for AT
        > 0d4e5a1 add invoice footer translations
        $ git cherry-pick 0d4e5a1 c81f0e2 && git push --force-with-lease origin release/2.8
        > To github.com:acme/shop-backend.git
        >    5e1a9c0..7a2b9d3  release/2.8 -> release/2.8
        A: Restored. Use `--force-with-lease` always: it refuses when the remote moved since your last fetch. I also enabled branch protection on release/* to forbid force pushes.
        """,
        exact="git push --force-with-lease origin release/2.8",
        paraphrase="a colleague's contributions vanished from the shared stabilization line after someone overwrote history upstream",
        mixed="--force-with-lease: a colleague's contributions vanished from the shared stabilization line",
        distractor="""
        U: git push is rejected: ! [rejected] release/2.8 -> release/2.8 (non-fast-forward)
        A: Priya pushed commits you do not have. Don't force: `git pull --rebase` then push. Nothing was lost, the server just refused the push.
        """,
    ),
    Incident(
        key="git-committed-env-secrets",
        cwd="/home/tom/work/orders-api",
        script="""
        U: I just realised .env with the production Stripe secret key was committed three weeks ago and pushed
        A: Treat the key as compromised: rotating it is the only real fix, since forks, clones and caches may have it. Rewriting history only limits further exposure.
        $ stripe api_keys roll sk_live_**** --expires-in 0 >/dev/null && echo rotated
        > rotated
        $ git filter-repo --path .env --invert-paths --force && git log --all --oneline -- .env | wc -l
        > 0
        A: Rotated the Stripe key, removed .env from all history with git filter-repo, force-pushed all branches (coordinated with the team), and asked GitHub support to purge cached views. .env is in .gitignore now and gitleaks runs as a pre-commit hook.
        """,
        exact="git filter-repo --path .env --invert-paths",
        paraphrase="payment provider credential leaked into version control long back; it got revoked and scrubbed from the project's past",
        mixed=".env: payment provider credential leaked into version control long back",
    ),
    Incident(
        key="git-autocrlf-whole-file-diff",
        cwd="/home/ana/src/dashboard-web",
        script="""
        U: my PR shows every line of 40 files as changed although I only edited a few lines
        $ git diff --stat HEAD~1 | tail -1; git diff HEAD~1 -- src/api.ts | cat -A | sed -n '6,7p'
        >  40 files changed, 5120 insertions(+), 5118 deletions(-)
        > -export const BASE = "/api";$
        > +export const BASE = "/api";^M$
        A: The `^M` shows CRLF line endings: your editor on Windows saved with CRLF and `core.autocrlf` is false on this machine, so git committed them as they are.
        ~ .gitattributes
        > +* text=auto eol=lf
        $ git add --renormalize . && git commit -m "normalize line endings" && git diff --stat HEAD~2 | tail -1
        >  3 files changed, 12 insertions(+), 4 deletions(-)
        A: With text=auto eol=lf in .gitattributes the repository decides, not each machine's setting. The PR diff is down to your real changes.
        """,
        exact="git add --renormalize",
        paraphrase="merge proposal displays thousands of touched rows although few were modified, owing to DOS newline conventions",
        mixed="CRLF: merge proposal displays thousands of touched rows although few were modified",
    ),
    Incident(
        key="git-submodule-not-our-ref",
        cwd="/home/kai/code/geo-wasm",
        script="""
        U: CI checkout fails: fatal: remote error: upload-pack: not our ref 3be91c04a7f2e6d1c8b0a9f3e2d1c0b9a8f7e6d5 ... Fetched in submodule path 'vendor/proj-data', but it did not contain 3be91c0
        A: The parent repo pins vendor/proj-data at commit 3be91c0, which does not exist on the submodule's remote: someone committed the submodule pointer after making a local commit inside the submodule without pushing it (or it was force-pushed away).
        $ cd vendor/proj-data && git branch -r --contains 3be91c0 2>&1 | head -1
        > error: no such commit 3be91c0
        $ git -C vendor/proj-data log --oneline -1 origin/main && git add vendor/proj-data && git commit -m "pin proj-data to origin/main"
        > 8a0f2c1 update EPSG tables to v11
        A: Re-pinned to 8a0f2c1, which is on the remote. `git push --recurse-submodules=check` in the team's config would have blocked the original push.
        """,
        exact="upload-pack: not our ref",
        paraphrase="automation clone breaks since the nested dependency references a revision nobody ever published",
        mixed="submodule: automation clone breaks, nested dependency references a revision nobody published",
    ),
    Incident(
        key="git-bisect-perf-regression",
        cwd="/home/kai/code/tilecache",
        script="""
        U: tile rendering got 3x slower somewhere in the last 200 commits, can you find where?
        $ git bisect start v0.4.0 v0.3.2 && git bisect run sh -c 'cargo build --release -q && ./scripts/bench_render.sh --max-ms 120'
        > running  'sh' '-c' 'cargo build --release -q && ./scripts/bench_render.sh --max-ms 120'
        > render p50 341ms > 120ms
        > c7d1e90a3f is the first bad commit
        > commit c7d1e90a3f
        >     use Arc<Mutex<Palette>> so palettes can be hot-swapped
        A: bisect ran 8 steps automatically. c7d1e90 wraps the palette in a Mutex that is now locked once per pixel in the inner loop.
        ~ src/render.rs
        > -        let color = palette.lock().unwrap().lookup(v);
        > +        let color = pal.lookup(v);
        A: The palette is locked once per tile and cloned into `pal` (an Arc swap would also work). p50 back to 108 ms.
        """,
        exact="git bisect run c7d1e90a3f is the first bad commit",
        paraphrase="drawing became three times sluggish over two hundred changes; binary search through history pinpointed excessive synchronization",
        mixed="bisect: drawing became three times sluggish over two hundred changes",
    ),
    Incident(
        key="unicode-nfd-filenames-macos",
        cwd="/Users/jonas/code/image-resizer",
        script="""
        U: files like "Café.jpg" uploaded from Macs can't be found by the Linux server: FileNotFoundError although ls shows the file
        $ python3 -c "import os; print([n.encode() for n in os.listdir('in') if n.startswith('Caf')])"
        > [b'Cafe\\xcc\\x81.jpg']
        A: The name on disk is in NFD: "e" followed by U+0301 COMBINING ACUTE ACCENT. macOS file APIs produce decomposed names; the database stores the NFC form "Café" (U+00E9), so the byte strings differ and the lookup fails on Linux, which does not normalize.
        ~ resizer/storage.py
        > +import unicodedata
        > +
        > +def canonical(name: str) -> str:
        > +    return unicodedata.normalize("NFC", name)
        A: Every stored and looked-up name goes through canonical() now, and a one-off script renamed existing files to NFC. git has `core.precomposeunicode=true` for the same issue on checkouts.
        """,
        exact="COMBINING ACUTE ACCENT NFD",
        paraphrase="diacritic picture titles sent from Apple machines can't be located on the penguin host owing to split glyph sequences",
        mixed="NFC: diacritic picture titles sent from Apple machines can't be located on the penguin host",
        distractor="""
        U: the upload form turns "Café.jpg" into "CafÃ©.jpg"
        A: The multipart filename is decoded as Latin-1 by the old werkzeug version; RFC 7578 says UTF-8. Upgrading werkzeug fixes the mojibake.
        A: Decoding, not NFC vs NFD normalization.
        """,
    ),
    Incident(
        key="js-utf16-surrogate-truncate",
        cwd="/home/ana/src/realtime-hub",
        script="""
        U: message previews sometimes end with a "�" character, especially with emoji
        @ src/preview.ts
        > export const preview = (text: string) => (text.length > 80 ? text.slice(0, 80) + "…" : text);
        A: JavaScript strings are UTF-16; an emoji like 😀 is a surrogate pair of two code units. slice(0, 80) can cut between the high and low surrogate, leaving a lone surrogate that renders as U+FFFD.
        ~ src/preview.ts
        > -export const preview = (text: string) => (text.length > 80 ? text.slice(0, 80) + "…" : text);
        > +const seg = new Intl.Segmenter(undefined, { granularity: "grapheme" });
        > +export function preview(text: string): string {
        > +  const parts = Array.from(seg.segment(text), (s) => s.segment);
        > +  return parts.length > 80 ? parts.slice(0, 80).join("") + "…" : text;
        > +}
        A: Intl.Segmenter cuts on grapheme clusters, so family emoji and flags (several code points) stay intact too.
        """,
        exact="text.slice(0, 80) surrogate pair",
        paraphrase="chat snippet shortening leaves a replacement glyph when a smiley gets chopped in half",
        mixed="U+FFFD: chat snippet shortening leaves a replacement glyph",
    ),
    Incident(
        key="turkish-dotless-i-lowercase",
        cwd="/home/omar/work/courier-android",
        script="""
        U: users in Turkey can't log in: the email comparison fails for addresses with an I, like "INFO@ACME.COM"
        @ app/src/main/java/com/acme/courier/auth/Emails.kt
        > fun normalize(email: String) = email.trim().lowercase(Locale.getDefault())
        A: With the Turkish default locale, "I".lowercase() is "ı" (dotless i, U+0131), not "i", so "INFO@ACME.COM" becomes "ınfo@acme.com" and does not match the stored address.
        ~ app/src/main/java/com/acme/courier/auth/Emails.kt
        > -fun normalize(email: String) = email.trim().lowercase(Locale.getDefault())
        > +fun normalize(email: String) = email.trim().lowercase(Locale.ROOT)
        A: Locale.ROOT for anything machine-readable (emails, identifiers, enum names). I found four more `Locale.getDefault()` case conversions in the protocol code and changed them too; a lint check (DefaultLocale) now flags them.
        """,
        exact="lowercase(Locale.getDefault()) dotless",
        paraphrase="people in Istanbul are unable to sign on since capital letters turn into an unexpected glyph under their regional settings",
        mixed="Locale.ROOT so people in Istanbul are able to sign on",
    ),
    Incident(
        key="regex-greedy-across-tags",
        cwd="/home/priya/work/price-scraper",
        script="""
        U: the price extractor returns a huge chunk of HTML instead of the price
        @ scraper/extract.py
        > PRICE_RE = re.compile(r'<span class="price">(.*)</span>', re.S)
        A: `.*` is greedy and with re.S it also matches newlines, so it runs to the last `</span>` on the page.
        ~ scraper/extract.py
        > -PRICE_RE = re.compile(r'<span class="price">(.*)</span>', re.S)
        > +PRICE_RE = re.compile(r'<span class="price">([^<]*)</span>')
        $ python -m scraper.extract tests/fixtures/product_881.html
        > 1.299,00 €
        A: Fixed with a negated class. For anything more complex I'd switch to selectolax with a CSS selector: regexes over HTML break on the next redesign.
        """,
        exact='<span class="price">(.*)</span>',
        paraphrase="web harvesting code grabs half the document rather than the cost figure because the wildcard pattern is too hungry",
        mixed="selectolax suggested since the wildcard pattern was too hungry",
        distractor="""
        U: the price extractor returns 1.299,00 as 1.299 when converting to float
        A: German formatting uses "." for thousands and "," for decimals; float("1.299") is 1.299. Parse with babel.numbers.parse_decimal(text, locale="de_DE").
        A: The regex matched correctly here, the conversion was wrong.
        """,
    ),
    Incident(
        key="js-regex-global-lastindex",
        cwd="/home/tom/work/checkout-ui",
        script="""
        U: the coupon code validation alternates: same valid code, first click OK, second click "invalid", third OK...
        @ src/coupons.ts
        > const CODE_RE = /^[A-Z0-9]{8}$/g;
        > export const isValidCode = (code: string) => CODE_RE.test(code);
        A: A regex with the `g` flag is stateful: `test()` stores `lastIndex` after a match, and the next call starts searching from there (position 8), fails, and resets lastIndex to 0. Hence the alternation.
        ~ src/coupons.ts
        > -const CODE_RE = /^[A-Z0-9]{8}$/g;
        > +const CODE_RE = /^[A-Z0-9]{8}$/;
        A: The global flag is meaningless for an anchored validation anyway. ESLint's `regexp/no-useless-flag` rule would catch it; added.
        """,
        exact="CODE_RE.test(code) lastIndex",
        paraphrase="voucher verification flips between accepted and rejected on consecutive presses for the very same promo",
        mixed="/g: voucher verification flips between accepted and rejected on consecutive presses",
    ),
    Incident(
        key="cron-dst-skipped-run",
        cwd="/home/sam/infra/edge",
        script="""
        U: the nightly 02:30 report didn't run on March 29 and ran twice on October 25 last year
        $ grep -E "^30 2" /etc/cron.d/reports; timedatectl | grep "Time zone"
        > 30 2 * * * reports /opt/reports/nightly.sh
        >        Time zone: Europe/Berlin (CET, +0100)
        A: The server runs in Europe/Berlin. On the spring DST change the clock jumps from 02:00 to 03:00, so 02:30 does not exist; in autumn 02:00-03:00 happens twice. Depending on the cron implementation the job is skipped or doubled.
        $ sudo timedatectl set-timezone UTC && sudo sed -i 's/^30 2 \\* \\* \\*/30 0 * * */' /etc/cron.d/reports
        >
        A: The server is on UTC now and the job runs at 00:30 UTC (01:30/02:30 Berlin), which is never ambiguous. The report itself formats dates in Europe/Berlin explicitly.
        """,
        exact="30 2 * * * reports /opt/reports/nightly.sh",
        paraphrase="the overnight summary vanished once in April and duplicated once in fall owing to daylight saving",
        mixed="DST: the overnight summary vanished once and duplicated once",
        distractor="""
        U: the nightly report shows yesterday's numbers as of 23:00, missing the last hour
        A: The SQL uses `WHERE created_at < current_date` in a UTC database while the business day is in Europe/Berlin; in summer that cuts two hours. Compute the day boundaries in Europe/Berlin and convert to UTC.
        A: The cron schedule itself ran fine.
        """,
    ),
    Incident(
        key="postgres-timestamp-without-tz",
        cwd="/home/sam/src/analytics-sql",
        script="""
        U: hourly order charts are shifted by one or two hours depending on the season
        $ psql analytics -c "\\d orders" | grep created_at
        >  created_at | timestamp without time zone |           | not null | now()
        A: The column is `timestamp without time zone` and the app servers write local Berlin time into it, while the dashboard treats it as UTC. Without zone information the values are ambiguous and DST shifts them by one or two hours.
        $ psql analytics -c "ALTER TABLE orders ALTER COLUMN created_at TYPE timestamptz USING created_at AT TIME ZONE 'Europe/Berlin'"
        > ALTER TABLE
        A: Converted to timestamptz, interpreting the existing values as Berlin local time. Postgres stores timestamptz as UTC internally, and the charts are correct across the DST boundary now. The duplicated hour in October 2025 remains ambiguous for 60 rows; I noted it.
        """,
        exact="timestamp without time zone AT TIME ZONE 'Europe/Berlin'",
        paraphrase="sales graphs per sixty minutes drift between summer and winter because saved moments carry no offset",
        mixed="timestamptz: sales graphs drift between summer and winter",
    ),
    Incident(
        key="leap-day-year-add",
        cwd="/home/priya/work/shift-planner",
        script="""
        U: creating a contract that starts on 2024-02-29 crashes: ValueError: day is out of range for month
        @ planner/contracts.py
        > def end_date(start: date, years: int) -> date:
        >     return start.replace(year=start.year + years)
        A: 2025-02-29 does not exist. `replace(year=...)` cannot move a leap day to a non-leap year.
        ~ planner/contracts.py
        > -    return start.replace(year=start.year + years)
        > +    return start + relativedelta(years=years)
        $ python -c "from datetime import date; from planner.contracts import end_date; print(end_date(date(2024,2,29), 1))"
        > 2025-02-28
        A: dateutil's relativedelta clamps to the last valid day of the month. Legal confirmed Feb 28 is the correct anniversary for these contracts. Added tests for Feb 29 and for Jan 31 + 1 month.
        """,
        exact="ValueError: day is out of range for month",
        paraphrase="agreement renewal computation blew up for a commencement on the twenty-ninth of February",
        mixed="relativedelta: agreement renewal computation blew up on the twenty-ninth of February",
    ),
    Incident(
        key="excel-scientific-notation-ids",
        cwd="/home/priya/work/vendor-import",
        script="""
        U: the tracking numbers in the CSV we send to the warehouse arrive as 4.0221E+17 when they open it
        A: Excel converts long numeric-looking strings to numbers on open, keeping only 15 significant digits and displaying scientific notation. The file itself is correct; Excel mangles it.
        $ head -2 exports/shipments_2026-03-14.csv
        > order_id;tracking_number;carrier
        > 88121;402210041288119021;DHL
        A: Options: send XLSX with the column typed as text, or quote with a formula prefix. The warehouse only uses Excel, so I generate XLSX with openpyxl and `number_format = "@"` for the id columns.
        ~ vendor_import/export.py
        > +    for cell in ws["B"]:
        > +        cell.number_format = "@"
        A: Verified by opening the file in Excel: all 18 digits intact.
        """,
        exact="4.0221E+17 tracking_number",
        paraphrase="parcel identifiers turn into rounded exponent style when the depot loads our spreadsheet",
        mixed="Excel: parcel identifiers turn into rounded exponent style",
    ),
    Incident(
        key="protobuf-descriptors-cannot-be-created",
        cwd="/home/maya/src/geo-batch",
        script="""
        U: after pip install -U the service fails at import: TypeError: Descriptors cannot be created directly. If this call came from a _pb2.py file, your generated code is out of date and must be regenerated with protoc >= 3.19.0.
        $ pip show protobuf | grep Version; head -5 geo/proto/tiles_pb2.py | grep -i "protoc"
        > Version: 5.27.2
        > # Protobuf Python Version: 3.12.4
        A: The _pb2.py files were generated with protoc 3.12 and protobuf 4+ (the upb backend) no longer accepts the old generated code.
        $ python -m grpc_tools.protoc -I proto --python_out=geo/proto --pyi_out=geo/proto proto/tiles.proto && python -c "import geo.proto.tiles_pb2"
        >
        A: Regenerated with grpcio-tools 1.64 (protoc 27). I added a CI step that regenerates and fails on diff so generated code cannot drift again. The quick workaround PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python would have worked but is much slower.
        """,
        exact="Descriptors cannot be created directly",
        paraphrase="after upgrading libraries the app crashes on boot because serialization stubs compiled by an ancient schema compiler are rejected",
        mixed="_pb2.py: after upgrading libraries the app crashes on boot",
        distractor="""
        U: grpc calls fail with StatusCode.UNIMPLEMENTED after the proto change
        A: The client calls `tiles.v2.TileService/Render` but the server still registers `tiles.v1`. Both sides need the same package name; deploy the server first.
        A: Generated code versions were fine; it was the package rename.
        """,
    ),
    Incident(
        key="npm-eintegrity-mismatch",
        cwd="/home/tom/work/monorepo",
        script="""
        U: npm ci fails on CI with EINTEGRITY: sha512-Xp3... integrity checksum failed when using sha512: wanted sha512-Xp3... but got sha512-9kQ...
        A: The tarball the registry serves for a package differs from what the lock recorded. Usually a private registry mirror or cache serving a different file.
        $ npm ci --loglevel=verbose 2>&1 | grep -m1 -B1 EINTEGRITY
        > npm http fetch GET 200 https://npm.acme.internal/@acme/ui-kit/-/ui-kit-4.2.0.tgz
        > npm ERR! code EINTEGRITY
        A: It is our own @acme/ui-kit 4.2.0: it was unpublished and republished with the same version to the internal registry after a hotfix, so the content changed under the same version.
        $ npm view @acme/ui-kit@4.2.1 dist.integrity
        > sha512-bT7...
        A: Bumped to 4.2.1 (the hotfix under a new version) and regenerated the lock entry. I also blocked republishing existing versions in the registry config (Verdaccio `allow_publish` of existing versions off).
        """,
        exact="EINTEGRITY integrity checksum failed when using sha512",
        paraphrase="reproducible install in automation aborts since an in-house component library was overwritten without bumping its release number",
        mixed="@acme/ui-kit overwritten without bumping its release number",
    ),
    Incident(
        key="python-jwt-wrong-package",
        cwd="/home/lee/projects/notes-api",
        script="""
        U: AttributeError: module 'jwt' has no attribute 'encode' — worked yesterday
        $ pip list 2>/dev/null | grep -i jwt; python -c "import jwt; print(jwt.__file__)"
        > jwt          1.3.1
        > PyJWT        2.9.0
        > /home/lee/projects/notes-api/.venv/lib/python3.12/site-packages/jwt/__init__.py
        A: Two distributions both install a top-level `jwt` package: PyJWT (which we use) and `jwt` (python-jwt, a different library). A new dependency pulled in `jwt`, and whichever installed last owns the jwt/ directory.
        $ pipdeptree -r -p jwt | head -3
        > jwt==1.3.1
        > └── fastapi-sso==0.6.0 [requires: jwt>=1.3]
        A: fastapi-sso 0.6 requires the wrong one; 0.7 switched to PyJWT. Upgraded fastapi-sso, uninstalled jwt, reinstalled PyJWT to restore its files.
        """,
        exact="module 'jwt' has no attribute 'encode'",
        paraphrase="token signing broke overnight because rival wheels ship an identically named namespace and the incorrect provider prevailed",
        mixed="PyJWT: token signing broke overnight, rival wheels ship an identically named namespace",
        distractor="""
        U: PyJWT raises jwt.exceptions.InvalidAlgorithmError: The specified alg value is not allowed
        A: PyJWT 2 requires `algorithms=["RS256"]` in decode(); the old code relied on PyJWT 1 accepting any algorithm from the header. Pass the list explicitly.
        A: The right package is installed here; it is an API change.
        """,
    ),
    Incident(
        key="python-locale-decimal-comma",
        cwd="/home/priya/work/vendor-import",
        script="""
        U: ValueError: could not convert string to float: '3,14' when importing the German price list
        A: The file uses a decimal comma and a period as thousands separator ("1.299,50"). float() only understands the C locale format.
        ~ vendor_import/numbers.py
        > -    return float(text)
        > +    return parse_decimal(text, locale="de_DE")
        $ python -c "from vendor_import.numbers import parse_price; print(parse_price('1.299,50'), parse_price('3,14'))"
        > 1299.50 3.14
        A: Babel's parse_decimal returns a Decimal and raises NumberFormatError on garbage instead of guessing. Avoided `locale.setlocale`, which is process-global and not thread-safe.
        """,
        exact="could not convert string to float: '3,14'",
        paraphrase="loading a Berlin supplier's tariff sheet fails because fractional amounts are written continental style",
        mixed="float: loading a Berlin supplier's tariff sheet, fractional amounts written continental style",
    ),
    Incident(
        key="shell-set-e-grep-no-match",
        cwd="/home/lee/projects/backup-tool",
        script="""
        U: release.sh works on my machine but in CI it silently stops halfway with exit code 1, no error message
        @ scripts/release.sh
        > #!/usr/bin/env bash
        > set -euo pipefail
        > TODOS=$(grep -rn "TODO(release)" src/)
        > echo "open release todos: ${TODOS:-none}"
        A: With `set -e`, grep returning 1 (no match) aborts the script. Locally you have a TODO(release) left, so grep exits 0; in CI the branch is clean and grep finds nothing.
        ~ scripts/release.sh
        > -TODOS=$(grep -rn "TODO(release)" src/)
        > +TODOS=$(grep -rn "TODO(release)" src/ || true)
        $ bash -x scripts/release.sh 2>&1 | tail -2
        > + echo 'open release todos: none'
        > open release todos: none
        """,
        exact='grep -rn "TODO(release)" src/',
        paraphrase="publishing routine quietly quits midway on the build server because a text search without hits counts as failure under strict mode",
        mixed="pipefail: publishing routine quietly quits midway, text search without hits counts as failure",
        distractor="""
        U: release.sh fails in CI with "sed: -e expression #1, char 12: unterminated `s' command"
        A: The version string contains a slash (release/2.8), which is the sed delimiter. Use `s|old|new|` instead.
        A: Not the grep exit status issue.
        """,
    ),
    Incident(
        key="shell-filenames-with-spaces",
        cwd="/home/lee/projects/backup-tool",
        script="""
        U: my loop over photos fails on names with spaces: convert: unable to open image 'Summer': No such file or directory
        @ scripts/thumbs.sh
        > for f in $(ls ~/Pictures/*.jpg); do
        >   convert "$f" -resize 320x "thumbs/$(basename "$f")"
        > done
        A: `$(ls ...)` output is split on whitespace, so "Summer Trip.jpg" becomes two words. Iterate over the glob directly; quoted expansions then keep each name whole.
        ~ scripts/thumbs.sh
        > -for f in $(ls ~/Pictures/*.jpg); do
        > +shopt -s nullglob
        > +for f in ~/Pictures/*.jpg; do
        A: nullglob avoids one iteration with the literal pattern when no file matches. shellcheck flags this (SC2045); I added it to pre-commit.
        """,
        exact="convert: unable to open image 'Summer'",
        paraphrase="preview generation breaks on vacation shots whose titles contain blanks",
        mixed="shellcheck: preview generation breaks on vacation shots whose titles contain blanks",
    ),
    Incident(
        key="makefile-missing-separator",
        cwd="/home/nina/src/mqtt-bridge",
        script="""
        U: make: Makefile:14: *** missing separator.  Stop.
        $ sed -n '13,15p' Makefile | cat -A
        > test: build$
        >     ./run_tests.sh$
        > $
        A: Recipe lines must start with a tab character; line 14 starts with four spaces (`cat -A` shows a tab as ^I, and there is none). Probably the editor converted tabs on save.
        ~ Makefile
        > -    ./run_tests.sh
        > +	./run_tests.sh
        A: I added an .editorconfig section `[Makefile] indent_style = tab` so it does not happen again.
        """,
        exact="*** missing separator.  Stop.",
        paraphrase="task automation rules rejected because leading whitespace turned into blanks instead of tabulation",
        mixed="Makefile: task automation rules rejected, leading whitespace turned into blanks",
    ),
    Incident(
        key="yaml-norway-problem",
        cwd="/home/ana/src/storefront",
        script="""
        U: Norway disappeared from the shipping countries dropdown
        @ config/shipping.yml
        > countries:
        >   - DE
        >   - AT
        >   - NO
        >   - SE
        $ python -c "import yaml; print(yaml.safe_load(open('config/shipping.yml'))['countries'])"
        > ['DE', 'AT', False, 'SE']
        A: YAML 1.1 (which PyYAML implements) treats unquoted NO as the boolean false, the "Norway problem". The frontend filters out non-strings.
        ~ config/shipping.yml
        > -  - NO
        > +  - "NO"
        A: Quoted all country codes. Switching the loader to ruamel.yaml (YAML 1.2, where only true/false are booleans) would avoid the class of bug; noted for later.
        """,
        exact="['DE', 'AT', False, 'SE']",
        paraphrase="a Scandinavian destination vanished from the delivery menu because a settings parser interpreted its ISO abbreviation as a falsy value",
        mixed="PyYAML: a Scandinavian destination vanished from the delivery menu",
    ),
    Incident(
        key="json-bigint-precision",
        cwd="/home/ana/src/dashboard-web",
        script="""
        U: clicking an order in the dashboard opens the wrong order, the id in the URL ends in 000 but the real one ends in 017
        $ curl -s localhost:8080/api/orders?limit=1 | head -c 60; node -e 'console.log(JSON.parse("{\\"id\\":1844674407370955017}").id)'
        > [{"id":1844674407370955017,"total":"129.00"
        > 1844674407370955000
        A: The ids are 64-bit snowflake ids. JSON.parse turns numbers into IEEE-754 doubles, exact only up to 2^53 (Number.MAX_SAFE_INTEGER), so the last digits are rounded.
        ~ orders-api/src/main/java/com/acme/orders/OrderDto.java
        > -    public long id;
        > +    @JsonSerialize(using = ToStringSerializer.class)
        > +    public long id;
        A: The API now sends ids as strings and the dashboard types them as string. Same pattern Twitter used with id_str.
        """,
        exact="1844674407370955017 MAX_SAFE_INTEGER",
        paraphrase="selecting a purchase in the admin panel loads another because large numeric identifiers get truncated in the browser",
        mixed="JSON.parse: selecting a purchase in the admin panel loads another",
        distractor="""
        U: the order totals show 129 instead of 129.00 in the dashboard
        A: The API sends totals as numbers and JSON drops trailing zeros. Format with Intl.NumberFormat and minimumFractionDigits: 2, or keep sending strings as the orders endpoint does.
        A: No precision loss here, only formatting.
        """,
    ),
    Incident(
        key="email-spf-dkim-spam",
        cwd="/home/lee/projects/newsletter",
        script="""
        U: since we moved sending to Postmark our newsletter goes to spam at Gmail
        $ dig +short TXT acme.io | grep spf; dig +short TXT 20260301pm._domainkey.acme.io | head -c 40; echo
        > "v=spf1 include:_spf.google.com ~all"
        >
        A: SPF does not include Postmark's servers and the DKIM key for Postmark was never published, so DMARC fails for mail from acme.io sent via Postmark. The Gmail headers say the same: `dmarc=fail (p=QUARANTINE)`.
        A: I added `include:spf.mtasv.net` to the SPF record and the DKIM TXT record from the Postmark dashboard, and set a custom Return-Path (pm-bounces.acme.io) so SPF aligns.
        $ dig +short TXT 20260301pm._domainkey.acme.io | head -c 30; echo
        > "k=rsa; p=MIGfMA0GCSqGSIb3DQEB
        A: Test mail to Gmail shows spf=pass dkim=pass dmarc=pass and lands in the inbox.
        """,
        exact="dmarc=fail (p=QUARANTINE) include:spf.mtasv.net",
        paraphrase="our bulletin ends up in junk folders at a big webmail provider since changing the delivery vendor without sender authentication",
        mixed="Postmark: our bulletin ends up in junk folders at a big webmail provider",
    ),
    Incident(
        key="memcached-cache-key-version",
        cwd="/home/jonas/code/shop-backend",
        script="""
        U: after the deploy the product pages crash with KeyError: 'price_gross' for about 10 minutes, then it's fine
        A: The new code expects `price_gross` in the cached product dict, but memcached still holds dicts built by the old code for up to 10 minutes (the TTL), and the new code reads them.
        @ catalog/cache.py
        > def product_key(pid):
        >     return f"product:{pid}"
        ~ catalog/cache.py
        > -    return f"product:{pid}"
        > +    return f"product:v{PRODUCT_CACHE_VERSION}:{pid}"
        A: The cache key includes a schema version that is bumped whenever the cached shape changes, so old entries are simply never read. Django's cache VERSION setting would do this globally; per-key is finer.
        """,
        exact="KeyError: 'price_gross' product_key",
        paraphrase="item screens fail briefly after each release since memoized objects from the previous build lack an added attribute",
        mixed="memcached: item screens fail briefly after each release",
    ),
    Incident(
        key="github-api-rate-limit-etag",
        cwd="/home/kai/code/release-bot",
        script="""
        U: the release bot stops working every afternoon: 403 API rate limit exceeded for installation ID 4412
        $ curl -sI -H "Authorization: Bearer $GH_TOKEN" https://api.github.com/rate_limit | grep -i x-ratelimit
        > x-ratelimit-limit: 5000
        > x-ratelimit-remaining: 0
        > x-ratelimit-reset: 1773496800
        A: The bot polls /repos/{repo}/pulls for 60 repositories every minute: 86,400 requests a day against a 5,000/hour budget.
        ~ bot/poll.py
        > +        headers = {"If-None-Match": etags.get(url, "")}
        >          resp = session.get(url, headers=headers)
        > +        if resp.status_code == 304:
        > +            continue
        > +        etags[url] = resp.headers["ETag"]
        A: Conditional requests that return 304 do not count against the rate limit. Better still: subscribe to pull_request webhooks and drop polling; that is the next step.
        """,
        exact="403 API rate limit exceeded for installation ID 4412",
        paraphrase="automation assistant goes dark daily because frequent querying burns through the hosting platform's quota",
        mixed="ETag: automation assistant goes dark daily, frequent querying burns the quota",
        distractor="""
        U: the release bot gets 404 for a private repository it should see
        A: The GitHub App is installed on the org but only for selected repositories, and the new repo was not added. 404 is GitHub's answer for "no access" on private repos.
        A: No rate limiting involved.
        """,
    ),
    Incident(
        key="exif-orientation-thumbnails",
        cwd="/home/maya/src/photo-site",
        script="""
        U: portrait photos from phones show up sideways in the thumbnails, the originals look fine in the browser
        $ exiftool -Orientation uploads/2026/03/IMG_4412.jpg
        > Orientation                     : Rotate 90 CW
        A: Phones store pixels in sensor orientation and record the rotation in the EXIF Orientation tag. Browsers apply it when showing the original; Pillow's thumbnail() ignores it.
        ~ photos/thumbs.py
        > -    img = Image.open(src)
        > +    img = ImageOps.exif_transpose(Image.open(src))
        A: exif_transpose rotates the pixels and drops the tag, so the thumbnail is upright everywhere. Regenerated the 12k existing thumbnails with a management command.
        """,
        exact="Orientation : Rotate 90 CW exif_transpose",
        paraphrase="vertical camera shots appear tilted in previews because the resizing library disregards embedded camera metadata",
        mixed="EXIF: vertical camera shots appear tilted in previews",
    ),
    Incident(
        key="dns-ttl-migration",
        cwd="/home/sam/infra/edge",
        script="""
        U: we moved api.acme.io to the new load balancer two hours ago and some customers still hit the old servers
        $ dig +noall +answer api.acme.io @ns-1.awsdns.example; dig +noall +answer api.acme.io @8.8.8.8
        > api.acme.io.  300  IN  CNAME  api-new-lb-41122.eu-central-1.elb.amazonaws.com.
        > api.acme.io.  81733  IN  A  203.0.113.40
        A: The record used to be an A record with TTL 86400 (one day); resolvers that cached it before the switch keep the old address for up to 24 hours. Lowering the TTL only helps if it is done a day before the change.
        A: Mitigation: keep the old servers running and proxy everything to the new load balancer until tomorrow. I set that up in nginx on the old hosts.
        ~ /etc/nginx/sites-enabled/api.conf
        > -        proxy_pass http://127.0.0.1:8080;
        > +        proxy_pass https://api-new-lb-41122.eu-central-1.elb.amazonaws.com;
        A: Runbook updated: lower TTL to 300 at least 24 h before a migration.
        """,
        exact="api.acme.io. 81733 IN A 203.0.113.40",
        paraphrase="after cutting traffic over to fresh hosting some clients continue reaching the retired machines since lookups are remembered long",
        mixed="TTL: some clients continue reaching the retired machines after cutting traffic over",
    ),
)
