"""Incidents from Python work: asyncio, pytest, packaging, Django, SQLAlchemy, Celery, typing."""

# Session scripts are transcript text: wrapping their lines would change the messages.
# ruff: noqa: E501

from __future__ import annotations

from bench.quality.incident import Incident

INCIDENTS: tuple[Incident, ...] = (
    Incident(
        key="py-pytest-asyncio-loop-closed",
        cwd="/home/maya/src/ingest-worker",
        script="""
        U: `pytest tests/test_fetcher.py` hangs after the second test and when I ctrl-c it prints RuntimeError: Event loop is closed. It started after I added the shared aiohttp client fixture.
        A: Let me look at the fixture first.
        @ tests/conftest.py
        > import aiohttp
        > import pytest
        >
        > @pytest.fixture(scope="session")
        > async def http_client():
        >     async with aiohttp.ClientSession() as session:
        >         yield session
        A: The fixture is session-scoped but pytest-asyncio gives every test function its own event loop by default. The ClientSession is bound to the loop of the first test; the second test awaits on a connector whose loop is already closed, so the await never completes.
        $ pytest tests/test_fetcher.py -x -q -p no:randomly
        > ..
        > RuntimeError: Event loop is closed
        > Task was destroyed but it is pending!
        > task: <Task pending name='Task-7' coro=<TCPConnector._resolve_host()>>
        A: Fix: give the session fixture and the tests the same loop scope. With pytest-asyncio 0.24 that is `loop_scope="session"` on the fixture plus `asyncio_default_fixture_loop_scope = "session"` in pytest.ini, and marking the module with `pytestmark = pytest.mark.asyncio(loop_scope="session")`.
        ~ tests/conftest.py
        > -@pytest.fixture(scope="session")
        > +@pytest_asyncio.fixture(scope="session", loop_scope="session")
        U: green now, 14 passed in 3.2s
        """,
        exact="RuntimeError: Event loop is closed",
        paraphrase="suite froze indefinitely once one reused web requester spanned several cases",
        mixed="pytest-asyncio suite froze once one reused web requester spanned several cases",
        distractor="""
        U: the `test_webhook_retry` test is slow, 40 seconds each run. It uses asyncio.sleep in the retry loop with pytest-asyncio.
        A: The retry helper sleeps for real between attempts. Patch the backoff so the test does not wait.
        @ app/webhooks.py
        > async def deliver(event, attempts=5):
        >     for n in range(attempts):
        >         try:
        >             return await post(event)
        >         except aiohttp.ClientError:
        >             await asyncio.sleep(2 ** n)
        A: I injected the sleep function as a parameter and the test passes a no-op coroutine; the suite is back to 0.4 s. No event loop issue here, just real waiting.
        """,
    ),
    Incident(
        key="py-circular-import-settings",
        cwd="/home/maya/src/billing-core",
        script="""
        U: after moving config into its own module the app won't start: ImportError: cannot import name 'Settings' from partially initialized module 'billing.config' (most likely due to a circular import)
        A: Let me trace who imports billing.config.
        $ grep -rn "from billing" billing/config.py billing/db.py
        > billing/config.py:3:from billing.db import engine_url
        > billing/db.py:1:from billing.config import Settings
        A: config imports db for `engine_url`, and db imports config for `Settings`. Whichever is imported first sees the other half-built. engine_url is a pure function of Settings, so it belongs next to Settings; I moved it into config.py and db.py now only depends on config.
        ~ billing/config.py
        > -from billing.db import engine_url
        > +def engine_url(s: "Settings") -> str:
        > +    return f"postgresql+psycopg://{s.db_user}@{s.db_host}/{s.db_name}"
        $ python -c "import billing.app"
        >
        A: Import works. I also added an import-linter contract so `billing.config` may not import from `billing.db` again.
        """,
        exact="partially initialized module 'billing.config'",
        paraphrase="couple of sources requiring one another, so boot died midway",
        mixed="billing.config and another source requiring one another, so boot died midway",
    ),
    Incident(
        key="py-pip-resolution-impossible",
        cwd="/home/priya/work/forecast-notebooks",
        script="""
        U: pip install -r requirements.txt fails with ResolutionImpossible. It worked last week.
        $ pip install -r requirements.txt
        > ERROR: Cannot install pandas==2.2.3 and numpy==1.24.4 because these package versions have conflicting dependencies.
        > The conflict is caused by:
        >     The user requested numpy==1.24.4
        >     pandas 2.2.3 depends on numpy>=1.26.0; python_version >= "3.12"
        > ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/
        A: The interpreter changed: the venv is now Python 3.12, and for 3.12 pandas 2.2.3 needs numpy >= 1.26. numpy 1.24 has no 3.12 wheels anyway. Bump the numpy pin to 1.26.4 (works with pandas 2.2.3 and scikit-learn 1.5).
        ~ requirements.txt
        > -numpy==1.24.4
        > +numpy==1.26.4
        $ pip install -r requirements.txt && python -c "import pandas, numpy; print(pandas.__version__, numpy.__version__)"
        > 2.2.3 1.26.4
        A: Installed. I would also commit a constraints file generated with pip-compile so the next interpreter bump shows the conflict in review instead of on install.
        """,
        exact="ResolutionImpossible pandas==2.2.3 numpy==1.24.4",
        paraphrase="solver gave up: array math lib outdated relative to the dataframe lib on newest CPython",
        mixed="ResolutionImpossible: array math lib outdated relative to the dataframe lib on newest CPython",
        distractor="""
        U: poetry add scikit-learn hangs on "Resolving dependencies..." for ten minutes
        A: Poetry backtracks through every numpy and scipy version when the python constraint in pyproject is open-ended (`python = "^3.9"`). Narrow it to `python = ">=3.11,<3.13"` and it resolves in seconds.
        $ poetry add scikit-learn -vvv | tail -3
        > Resolving dependencies... (4.1s)
        > Installing scikit-learn (1.5.2)
        > Writing lock file
        A: Done. It was the open python range, not a real conflict between pandas and numpy.
        """,
    ),
    Incident(
        key="py-django-migration-leaf-nodes",
        cwd="/home/jonas/code/shop-backend",
        script="""
        U: CI fails on `python manage.py migrate --check` after merging main into my branch
        $ python manage.py makemigrations --check --dry-run
        > CommandError: Conflicting migrations detected; multiple leaf nodes in the migration graph: (0042_order_gift_note, 0042_order_tracking_code in orders).
        > To fix them run 'python manage.py makemigrations --merge'
        A: Both branches added a migration numbered 0042 on top of 0041 in the orders app. The two are independent (different columns), so a merge migration is the right fix rather than renumbering.
        $ python manage.py makemigrations orders --merge --noinput
        > Created new merge migration /home/jonas/code/shop-backend/orders/migrations/0043_merge_20260311_1042.py
        $ python manage.py migrate && python manage.py test orders
        > Ran 88 tests in 12.418s
        > OK
        A: Merge migration committed. If you ever need the columns in a fixed order (one depends on the other) edit `dependencies` in 0043 instead.
        """,
        exact="Conflicting migrations detected; multiple leaf nodes",
        paraphrase="parallel feature efforts produced sibling DB revisions; history diverged",
        mixed="makemigrations after parallel feature efforts produced sibling DB revisions",
        distractor="""
        U: `python manage.py migrate` fails on staging: django.db.utils.ProgrammingError: column "tracking_code" of relation "orders_order" already exists
        A: Someone added the column by hand on staging. The migration history and the real schema disagree, so fake just that migration.
        $ python manage.py migrate orders 0042 --fake
        >   Applying orders.0042_order_tracking_code... FAKED
        A: Staging is in sync now; no merge needed, the migration graph itself was fine.
        """,
    ),
    Incident(
        key="py-sqlalchemy-detached-instance",
        cwd="/home/priya/work/claims-api",
        script="""
        U: The report endpoint throws sqlalchemy.orm.exc.DetachedInstanceError: Parent instance <Claim at 0x7f3a2c> is not bound to a Session; lazy load operation of attribute 'adjuster' cannot proceed
        A: Let me see how the claims are loaded.
        @ claims/reports.py
        > def load_claims(ids):
        >     with SessionLocal() as db:
        >         return db.scalars(select(Claim).where(Claim.id.in_(ids))).all()
        >
        > def render(ids):
        >     return [f"{c.number}: {c.adjuster.name}" for c in load_claims(ids)]
        A: The `with SessionLocal()` block closes the session before `render` touches `c.adjuster`, a lazy relationship. Eager-load it in the query so nothing needs the session afterwards.
        ~ claims/reports.py
        > -        return db.scalars(select(Claim).where(Claim.id.in_(ids))).all()
        > +        stmt = select(Claim).options(selectinload(Claim.adjuster)).where(Claim.id.in_(ids))
        > +        return db.scalars(stmt).all()
        A: selectinload issues one extra SELECT for all adjusters instead of one per claim, which also fixes the N+1 you would have had inside the session.
        """,
        exact="DetachedInstanceError lazy load operation of attribute 'adjuster'",
        paraphrase="mapped entity accessed outside its transaction scope; lazily pulling the associated employee blew up",
        mixed="DetachedInstanceError: lazily pulling the associated employee outside its transaction scope",
    ),
    Incident(
        key="py-celery-visibility-timeout",
        cwd="/srv/apps/media-pipeline",
        script="""
        U: our `transcode_video` celery task runs two or three times for the same upload. We use Redis as broker and acks_late=True.
        A: Long tasks + acks_late on Redis usually means the visibility timeout. Let me check the config and the task duration.
        $ grep -n "visibility_timeout\\|acks_late" pipeline/celeryconfig.py; grep -c "Task transcode_video.*succeeded in" /var/log/celery/worker.log
        > 12:task_acks_late = True
        > 311
        A: No `visibility_timeout` is set, so the Redis transport default of 3600 seconds applies. Some transcodes take 70–90 minutes; after an hour Redis hands the unacknowledged message to another worker, which starts the same job again.
        ~ pipeline/celeryconfig.py
        >  task_acks_late = True
        > +broker_transport_options = {"visibility_timeout": 4 * 3600}
        A: Set it above the longest job. I also made the task idempotent by checking `Upload.status == "transcoded"` at start, so a redelivery is harmless.
        """,
        exact="transcode_video visibility_timeout",
        paraphrase="same movie encoding happens repeatedly since unconfirmed deliveries reappear from the in-memory datastore",
        mixed="acks_late movie encoding happens repeatedly since unconfirmed deliveries reappear",
        distractor="""
        U: celery beat sends the nightly `cleanup_uploads` task twice since we scaled to two pods
        A: Each pod runs its own beat scheduler. Only one beat may run: move `celery beat` into its own single-replica deployment, or use a Redis lock via celery-redbeat.
        $ kubectl get pods -l app=media-worker -o name
        > pod/media-worker-5d9c7-abcde
        > pod/media-worker-5d9c7-fghij
        A: I split beat out into `media-beat` with replicas: 1; workers no longer pass `-B`.
        """,
    ),
    Incident(
        key="py-mutable-default-arg",
        cwd="/home/lee/projects/tagger",
        script="""
        U: weird bug: every new Photo seems to get the tags of the previous photos. photo.add_tag("beach") on one photo shows up on another one created later.
        @ tagger/models.py
        > class Photo:
        >     def __init__(self, path, tags=[]):
        >         self.path = path
        >         self.tags = tags
        >
        >     def add_tag(self, tag):
        >         self.tags.append(tag)
        A: Classic mutable default argument: the `tags=[]` list is created once when the function is defined and every Photo built without explicit tags shares that same list object.
        ~ tagger/models.py
        > -    def __init__(self, path, tags=[]):
        > -        self.path = path
        > -        self.tags = tags
        > +    def __init__(self, path, tags=None):
        > +        self.path = path
        > +        self.tags = list(tags) if tags is not None else []
        A: I also enabled ruff rule B006 so this pattern is flagged in review.
        $ ruff check tagger --select B006
        > All checks passed!
        """,
        exact="def __init__(self, path, tags=[])",
        paraphrase="keywords bleed across unrelated images through a common array evaluated only at declaration",
        mixed="B006: keywords bleed across unrelated images through a common array",
    ),
    Incident(
        key="py-csv-unicode-decode-0xff",
        cwd="/home/priya/work/vendor-import",
        script="""
        U: importing the supplier CSV crashes: UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe9 in position 1187: invalid continuation byte
        A: 0xe9 is "é" in Latin-1/Windows-1252; the file was exported from Excel on Windows. Let me confirm.
        $ file -i data/suppliers_2026_03.csv; head -c 1200 data/suppliers_2026_03.csv | tail -c 40 | xxd | head -2
        > data/suppliers_2026_03.csv: text/plain; charset=iso-8859-1
        > 00000000: 3b43 6166 e920 4d6f 6e64 653b 3132 3b46  ;Caf. Monde;12;F
        A: Confirmed cp1252. I read with `encoding="cp1252"` when the UTF-8 decode fails, and normalise to UTF-8 on the way in. Also the delimiter is `;` not `,` (Excel with a French locale).
        ~ vendor_import/reader.py
        > -    with open(path, newline="") as fh:
        > -        rows = list(csv.DictReader(fh))
        > +    raw = Path(path).read_bytes()
        > +    try:
        > +        text = raw.decode("utf-8-sig")
        > +    except UnicodeDecodeError:
        > +        text = raw.decode("cp1252")
        > +    rows = list(csv.DictReader(io.StringIO(text, newline=""), delimiter=";"))
        A: "Café Monde" comes through correctly now.
        """,
        exact="can't decode byte 0xe9 in position 1187",
        paraphrase="accented characters in a spreadsheet broke ingestion; legacy western codepage",
        mixed="cp1252 accented characters broke ingestion; legacy western codepage",
        distractor="""
        U: the JSON export shows "CafÃ© Monde" instead of Café Monde
        A: That is mojibake: UTF-8 bytes decoded as Latin-1 somewhere and re-encoded. The API reads the upstream response with `response.encoding = "ISO-8859-1"` because the server sends no charset.
        ~ vendor_import/client.py
        > -    text = resp.text
        > +    text = resp.content.decode("utf-8")
        A: Decoding the bytes as UTF-8 explicitly fixes the double encoding; nothing crashed, the text was just garbled.
        """,
    ),
    Incident(
        key="py-pandas-setting-with-copy",
        cwd="/home/priya/work/forecast-notebooks",
        script="""
        U: I set df[df.region == "EU"]["discount"] = 0.1 but the dataframe doesn't change, only a SettingWithCopyWarning
        A: That is chained indexing: `df[mask]` returns a new frame, and the assignment writes into that temporary copy, which is thrown away.
        $ python -W error::pandas.errors.SettingWithCopyWarning scripts/apply_discounts.py
        > pandas.errors.SettingWithCopyWarning:
        > A value is trying to be set on a copy of a slice from a DataFrame.
        > Try using .loc[row_indexer,col_indexer] = value instead
        A: Use a single `.loc` call with the mask and the column so pandas writes into `df` itself. With pandas 3 copy-on-write the chained form silently does nothing, so better fix it now.
        ~ scripts/apply_discounts.py
        > -df[df.region == "EU"]["discount"] = 0.1
        > +df.loc[df.region == "EU", "discount"] = 0.1
        U: fixed, EU rows have 0.1 now
        """,
        exact="SettingWithCopyWarning",
        paraphrase="putting a rebate on European entries had zero effect on the table",
        mixed="SettingWithCopyWarning: putting a rebate on European entries had zero effect",
    ),
    Incident(
        key="py-lru-cache-method-leak",
        cwd="/home/maya/src/ingest-worker",
        script="""
        U: memory of the worker grows ~200MB per hour until the OOM killer takes it. tracemalloc top stats point at parser.py
        $ python -X tracemalloc=25 scripts/profile_worker.py --minutes 5 | head -5
        > parser.py:41: size=612 MiB, count=48211, average=13.3 KiB
        > parser.py:58: size=41.2 MiB, count=48211, average=896 B
        @ ingest/parser.py
        > class DocumentParser:
        >     def __init__(self, schema):
        >         self.schema = schema
        >
        >     @functools.lru_cache(maxsize=None)
        >     def parse(self, payload: bytes) -> dict:
        >         return self._decode(payload)
        A: `functools.lru_cache` on a method keys the cache on (self, payload) and the cache lives on the class: it keeps every payload and every DocumentParser instance alive forever, with maxsize=None it never evicts.
        A: The payloads are unique anyway, so the cache never hits. I removed it; if a cache is wanted it should be a bounded per-instance dict.
        ~ ingest/parser.py
        > -    @functools.lru_cache(maxsize=None)
        >      def parse(self, payload: bytes) -> dict:
        U: RSS is flat at 310MB after an hour now
        """,
        exact="functools.lru_cache(maxsize=None) def parse",
        paraphrase="RAM rises steadily till crash; memoization decorator on an object member retains references",
        mixed="tracemalloc: RAM rises steadily till crash; memoization decorator retains references",
        distractor="""
        U: worker RSS jumps to 2GB when a big batch arrives but then stays there
        A: That is the allocator keeping freed arenas, not a leak: glibc malloc does not return fragmented memory to the OS. Setting MALLOC_ARENA_MAX=2 and processing the batch in slices of 500 documents keeps the peak down.
        $ MALLOC_ARENA_MAX=2 python scripts/profile_worker.py --minutes 5 | tail -1
        > peak RSS 640 MiB, steady 410 MiB
        A: No functools.lru_cache or parser change needed here.
        """,
    ),
    Incident(
        key="py-multiprocessing-spawn-bootstrap",
        cwd="/Users/jonas/code/image-resizer",
        script="""
        U: running resize.py on my Mac prints a wall of errors: "An attempt has been made to start a new process before the current process has finished its bootstrapping phase." Works on the Linux box.
        @ resize.py
        > from multiprocessing import Pool
        > from pathlib import Path
        >
        > files = sorted(Path("in").glob("*.jpg"))
        > with Pool(8) as pool:
        >     pool.map(shrink, files)
        A: macOS defaults to the `spawn` start method since Python 3.8: each child re-imports resize.py, and because the Pool is created at module level every child tries to create its own Pool. Linux uses fork, so the module is not re-imported there.
        ~ resize.py
        > -files = sorted(Path("in").glob("*.jpg"))
        > -with Pool(8) as pool:
        > -    pool.map(shrink, files)
        > +def main() -> None:
        > +    files = sorted(Path("in").glob("*.jpg"))
        > +    with Pool(8) as pool:
        > +        pool.map(shrink, files)
        > +
        > +if __name__ == "__main__":
        > +    main()
        $ python resize.py && ls out | wc -l
        > 412
        """,
        exact="finished its bootstrapping phase",
        paraphrase="concurrent thumbnail generation breaks on Apple laptops but fine under Ubuntu",
        mixed="Pool inside a thumbnail script explodes on an Apple laptop only",
    ),
    Incident(
        key="py-fastapi-422-body",
        cwd="/home/lee/projects/notes-api",
        script="""
        U: POST /notes returns 422 Unprocessable Entity, the body is {"title": "x", "body": "y"}
        $ curl -s -X POST localhost:8000/notes -H 'content-type: application/json' -d '{"title":"x","body":"y"}'
        > {"detail":[{"type":"missing","loc":["query","title"],"msg":"Field required","input":null}]}
        A: `loc: ["query", "title"]` means FastAPI expects `title` as a query parameter: the handler declares plain `title: str, body: str` arguments, which FastAPI treats as query parameters. Declare a Pydantic model instead so it is read from the JSON body.
        ~ notes/routes.py
        > -@router.post("/notes")
        > -async def create_note(title: str, body: str):
        > +class NoteIn(BaseModel):
        > +    title: str
        > +    body: str
        > +
        > +@router.post("/notes")
        > +async def create_note(note: NoteIn):
        $ curl -s -X POST localhost:8000/notes -H 'content-type: application/json' -d '{"title":"x","body":"y"}'
        > {"id":17,"title":"x","body":"y"}
        """,
        exact='"loc":["query","title"],"msg":"Field required"',
        paraphrase="web framework rejects submitted payload, wanting values inside the URL",
        mixed="422 web framework rejects submitted payload, wanting values inside the URL",
    ),
    Incident(
        key="py-pickle-local-object",
        cwd="/home/maya/src/geo-batch",
        script="""
        U: I switched ThreadPoolExecutor to ProcessPoolExecutor because the geocoding is CPU bound, now: AttributeError: Can't pickle local object 'run_batch.<locals>.worker'
        A: Process pools send the callable to the children by pickling it, and pickle can only reference module-level functions by name. `worker` is a closure defined inside run_batch.
        @ geo/batch.py
        > def run_batch(rows, precision):
        >     def worker(row):
        >         return snap_to_grid(row, precision)
        >     with ProcessPoolExecutor() as ex:
        >         return list(ex.map(worker, rows, chunksize=256))
        ~ geo/batch.py
        > -    def worker(row):
        > -        return snap_to_grid(row, precision)
        > +    worker = functools.partial(snap_to_grid, precision=precision)
        A: `functools.partial` of a module-level function pickles fine. chunksize=256 keeps the IPC overhead low.
        $ python -m geo.batch --rows 200000
        > 200000 rows in 9.8s (was 41.0s with threads)
        """,
        exact="Can't pickle local object 'run_batch.<locals>.worker'",
        paraphrase="moving coordinate crunching onto separate OS forks: nested helper unserializable",
        mixed="ProcessPoolExecutor could not serialize a nested helper",
    ),
    Incident(
        key="py-naive-aware-datetime",
        cwd="/home/jonas/code/shop-backend",
        script="""
        U: the coupon expiry check crashes: TypeError: can't compare offset-naive and offset-aware datetimes
        @ coupons/rules.py
        > def is_expired(coupon) -> bool:
        >     return datetime.utcnow() > coupon.expires_at
        A: `coupon.expires_at` comes from a `DateTimeField` with USE_TZ=True, so it is aware (UTC), while `datetime.utcnow()` returns a naive value. utcnow is deprecated since Python 3.12 for exactly this reason.
        ~ coupons/rules.py
        > -    return datetime.utcnow() > coupon.expires_at
        > +    return timezone.now() > coupon.expires_at
        $ python manage.py test coupons
        > Ran 23 tests in 0.911s
        > OK
        A: I also grepped for other utcnow calls; there were two in reports/, replaced the same way.
        """,
        exact="can't compare offset-naive and offset-aware datetimes",
        paraphrase="voucher validity logic blew up mixing zoneless moment with zone-attached moment",
        mixed="utcnow voucher validity logic blew up mixing zoneless moment with zone-attached moment",
        distractor="""
        U: coupons expire one hour early for customers in Berlin
        A: The expiry is entered in the admin as local midnight but stored as UTC midnight because the admin form uses `datetime.combine(day, time.min)` without a tzinfo and USE_TZ converts it as UTC.
        ~ coupons/forms.py
        > -        return datetime.combine(day, time.min)
        > +        return datetime.combine(day, time.min, tzinfo=ZoneInfo("Europe/Berlin"))
        A: No crash involved, only the wrong offset for the coupon expiry.
        """,
    ),
    Incident(
        key="py-pytest-order-dependent",
        cwd="/home/lee/projects/notes-api",
        script="""
        U: test_list_notes passes alone but fails in the full run, and only sometimes. We installed pytest-randomly last week.
        $ pytest -p randomly -p "randomly" --randomly-seed=1234 -q 2>&1 | tail -4
        > FAILED tests/test_notes.py::test_list_notes - assert 3 == 1
        > 1 failed, 61 passed in 4.12s
        A: Seed 1234 reproduces it. `assert 3 == 1` means rows from other tests are still in the table: something commits outside the per-test transaction.
        $ grep -rn "scope=\\"module\\"" tests/
        > tests/test_search.py:9:@pytest.fixture(scope="module")
        A: test_search.py has a module-scoped fixture that inserts two notes with its own connection and commits, and never deletes them. Randomised order sometimes runs it before test_list_notes.
        ~ tests/test_search.py
        > -@pytest.fixture(scope="module")
        > -def seeded(db_engine):
        > +@pytest.fixture
        > +def seeded(db_session):
        A: Now it goes through the function-scoped `db_session` fixture that rolls back. 20 runs with random seeds pass.
        """,
        exact="--randomly-seed=1234",
        paraphrase="flaky spec: green solo, red when shuffled, leftover records leak across cases",
        mixed="pytest-randomly flaky spec: green solo, red when shuffled, leftover records leak",
    ),
    Incident(
        key="py-poetry-lock-outdated",
        cwd="/home/maya/src/billing-core",
        script="""
        U: CI install step fails: pyproject.toml changed significantly since poetry.lock was last generated. Run `poetry lock [--no-update]` to fix the lock file.
        A: Someone edited the dependency table by hand (added `httpx`) without regenerating the lock. The content-hash in poetry.lock no longer matches.
        $ git log -1 --format=%h%x20%s -- pyproject.toml; grep content-hash poetry.lock
        > 9c1e2d4 add httpx for the payments client
        > content-hash = "4b1f09c8e2..."
        $ poetry lock --no-update && git diff --stat
        >  poetry.lock | 58 +++++++++++++++++++++++++++++++++++++++++++++-----
        >  1 file changed, 53 insertions(+), 5 deletions(-)
        A: `--no-update` keeps every other pinned version and only adds httpx and its deps (anyio, sniffio, h11). I added a pre-commit hook `poetry check --lock` so this fails locally next time.
        """,
        exact="changed significantly since poetry.lock was last generated",
        paraphrase="build rejects requirements snapshot as stale after manual manifest modification",
        mixed="poetry.lock rejected as stale after manual manifest modification",
    ),
    Incident(
        key="py-logging-duplicate-lines",
        cwd="/srv/apps/media-pipeline",
        script="""
        U: every log line appears twice in the console, sometimes three times
        @ pipeline/log.py
        > def get_logger(name):
        >     logger = logging.getLogger(name)
        >     handler = logging.StreamHandler()
        >     handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
        >     logger.addHandler(handler)
        >     return logger
        A: Two causes stack up: get_logger adds a new StreamHandler every time it is called for the same name, and the logger still propagates to the root logger, which has its own handler from `logging.basicConfig` in main.
        ~ pipeline/log.py
        > -    logger.addHandler(handler)
        > +    if not logger.handlers:
        > +        logger.addHandler(handler)
        > +    logger.propagate = False
        $ python -m pipeline.run --dry-run 2>&1 | head -3
        > 2026-03-12 10:01:22,114 pipeline.run starting dry run
        > 2026-03-12 10:01:22,118 pipeline.fetch 3 sources
        A: One line each now.
        """,
        exact="logger.propagate = False",
        paraphrase="diagnostic entries show up duplicated or triplicated in terminal",
        mixed="StreamHandler diagnostic entries show up duplicated or triplicated in terminal",
    ),
    Incident(
        key="py-requests-cert-verify",
        cwd="/home/priya/work/vendor-import",
        script="""
        U: on the office network requests.get to the vendor API fails: SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer certificate'))
        A: The corporate proxy does TLS inspection and re-signs traffic with its own root CA, which is in the OS trust store but not in certifi's bundle that requests uses.
        $ openssl s_client -connect api.vendor.example:443 -showcerts </dev/null 2>/dev/null | grep "i:" | tail -1
        > i:CN = Zscaler Root CA
        A: Issuer is the Zscaler root. Rather than `verify=False`, point requests at a bundle that includes it: `export REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt` (Debian's system bundle, which IT already provisions with the Zscaler cert).
        $ REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt python -m vendor_import.ping
        > 200 OK
        A: Works. I added the variable to the .envrc and documented it in the README.
        """,
        exact="CERTIFICATE_VERIFY_FAILED unable to get local issuer certificate",
        paraphrase="HTTPS handshake rejected on company LAN due to middlebox intercepting encryption",
        mixed="Zscaler interception made outbound HTTPS calls untrusted",
        distractor="""
        U: the vendor API started failing today with certificate has expired
        $ echo | openssl s_client -connect api.vendor.example:443 2>/dev/null | openssl x509 -noout -enddate
        > notAfter=Mar 10 23:59:59 2026 GMT
        A: Their leaf certificate expired last night; nothing on our side. I emailed their support and added a health check that alerts 14 days before notAfter.
        """,
    ),
    Incident(
        key="py-gunicorn-worker-timeout",
        cwd="/srv/apps/pdf-service",
        script="""
        U: gunicorn keeps logging [CRITICAL] WORKER TIMEOUT (pid:2714) and clients get 502 from nginx when generating big invoices
        $ grep -E "WORKER TIMEOUT|Booting worker" /var/log/pdf-service/gunicorn.log | tail -4
        > [2026-03-14 09:12:40 +0000] [2701] [CRITICAL] WORKER TIMEOUT (pid:2714)
        > [2026-03-14 09:12:41 +0000] [2733] [INFO] Booting worker with pid: 2733
        A: Sync workers are killed after `--timeout 30`. A 300-page invoice takes ~45 s in WeasyPrint, so the arbiter kills the worker mid-render and nginx sees the upstream connection drop.
        A: Raising the timeout alone ties up a sync worker per request. Better: render in a background job and return 202 with a polling URL; meanwhile set `--timeout 120` so today's requests finish.
        ~ deploy/gunicorn.conf.py
        > -timeout = 30
        > +timeout = 120
        > +graceful_timeout = 30
        U: ok deploy the quick fix now, job queue next sprint
        """,
        exact="[CRITICAL] WORKER TIMEOUT (pid:2714)",
        paraphrase="huge billing documents exceed the WSGI server deadline; proxy gives bad gateway",
        mixed="WeasyPrint huge billing documents exceed the WSGI server deadline",
        distractor="""
        U: nginx returns 504 Gateway Time-out for the invoice export
        A: nginx gives up before gunicorn does: `proxy_read_timeout` is the default 60s while the export takes ~80s.
        ~ deploy/nginx/pdf.conf
        > +    proxy_read_timeout 180s;
        A: The gunicorn workers were never killed in this case; only the proxy timed out.
        """,
    ),
    Incident(
        key="py-decimal-rounding-invoice",
        cwd="/home/jonas/code/shop-backend",
        script="""
        U: invoice totals are off by one cent vs the accounting export, e.g. we show 10.07 and they show 10.08
        $ python -c "print(round(2.675, 2), round(10.075, 2))"
        > 2.67 10.07
        A: Two problems: floats cannot represent 10.075 exactly (it is 10.07499999...), and Python's round() does banker's rounding anyway. The accounting system rounds half up on exact decimals.
        ~ invoices/totals.py
        > -    return round(sum(line.price * line.qty for line in lines) * (1 + vat), 2)
        > +    total = sum((line.price * line.qty for line in lines), Decimal("0")) * (1 + vat)
        > +    return total.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        A: `price` is now a `DecimalField` end to end (it was converted to float in the serializer). The 1,200 sample invoices from the export match to the cent.
        """,
        exact="quantize(Decimal(\"0.01\"), rounding=ROUND_HALF_UP)",
        paraphrase="billing amounts drift by a penny versus bookkeeping, binary fraction imprecision",
        mixed="ROUND_HALF_UP billing amounts drift by a penny versus bookkeeping",
        distractor="""
        U: the VAT line on invoices shows 19.000000000000004 in the PDF
        A: The template prints the float directly. Totals were already Decimal, but the VAT rate is read from settings as a float and multiplied in the template. Format with `{:.2f}` in the template and keep the rate as `Decimal("0.19")` in settings.
        A: The amounts themselves were right to the cent here; only the display of the rate was ugly.
        """,
    ),
    Incident(
        key="py-subprocess-pipe-deadlock",
        cwd="/home/lee/projects/backup-tool",
        script="""
        U: the backup script hangs forever when the tar output is large, small folders are fine
        @ backup/archive.py
        > proc = subprocess.Popen(["tar", "-cvf", dest, src], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        > proc.wait()
        > log.info(proc.stdout.read())
        A: `tar -v` writes one line per file to stdout. The pipe buffer is 64 KiB; once it is full tar blocks writing, while we block in `wait()` before reading: a deadlock. The docs warn about exactly this with PIPE and wait().
        ~ backup/archive.py
        > -proc = subprocess.Popen(["tar", "-cvf", dest, src], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        > -proc.wait()
        > -log.info(proc.stdout.read())
        > +res = subprocess.run(["tar", "-cvf", dest, src], capture_output=True, text=True, check=True)
        > +log.info("%d files archived", res.stdout.count("\\n"))
        $ python -m backup.archive ~/photos /tmp/photos.tar
        > 48113 files archived
        """,
        exact="proc.wait() stdout=subprocess.PIPE",
        paraphrase="nightly snapshot program stalls indefinitely with huge directories; child stuck emitting",
        mixed="subprocess.Popen nightly snapshot program stalls indefinitely with huge directories",
    ),
    Incident(
        key="py-pydantic-v2-migration",
        cwd="/home/lee/projects/notes-api",
        script="""
        U: upgraded to pydantic 2.9 and the logs are full of PydanticDeprecatedSince20 warnings, and one validator stopped running
        $ pytest -q -W error::DeprecationWarning 2>&1 | grep -m3 Pydantic
        > PydanticDeprecatedSince20: The `dict` method is deprecated; use `model_dump` instead.
        > PydanticDeprecatedSince20: Pydantic V1 style `@validator` validators are deprecated.
        > PydanticDeprecatedSince20: Support for class-based `config` is deprecated, use ConfigDict instead.
        A: Three mechanical changes: `.dict()` → `.model_dump()`, `@validator` → `@field_validator` (now a classmethod), `class Config` → `model_config = ConfigDict(...)`. The validator that stopped running used `pre=True`; in v2 that is `mode="before"`.
        ~ notes/schemas.py
        > -    @validator("tags", pre=True)
        > -    def split_tags(cls, v):
        > +    @field_validator("tags", mode="before")
        > +    @classmethod
        > +    def split_tags(cls, v):
        $ pytest -q -W error::DeprecationWarning
        > 61 passed in 3.90s
        """,
        exact="PydanticDeprecatedSince20 model_dump",
        paraphrase="typed data library major bump spams obsolescence notices; coercion hook quit firing",
        mixed="field_validator after a typed data library major bump spams obsolescence notices",
    ),
    Incident(
        key="py-aiohttp-unclosed-session",
        cwd="/home/maya/src/ingest-worker",
        script="""
        U: at shutdown we get "Unclosed client session" and "Unclosed connector" warnings, and asyncio.gather seems to lose exceptions from failed feeds
        @ ingest/feeds.py
        > async def poll_all(urls):
        >     session = aiohttp.ClientSession()
        >     results = await asyncio.gather(*(fetch(session, u) for u in urls), return_exceptions=True)
        >     return [r for r in results if not isinstance(r, Exception)]
        A: The session is never closed, hence the warnings. And `return_exceptions=True` turns failures into values which the list comprehension then silently drops: the failed feeds disappear without a log line.
        ~ ingest/feeds.py
        > -    session = aiohttp.ClientSession()
        > -    results = await asyncio.gather(*(fetch(session, u) for u in urls), return_exceptions=True)
        > -    return [r for r in results if not isinstance(r, Exception)]
        > +    async with aiohttp.ClientSession() as session:
        > +        results = await asyncio.gather(*(fetch(session, u) for u in urls), return_exceptions=True)
        > +    for url, r in zip(urls, results):
        > +        if isinstance(r, Exception):
        > +            log.warning("feed %s failed: %r", url, r)
        > +    return [r for r in results if not isinstance(r, Exception)]
        """,
        exact="Unclosed client session Unclosed connector",
        paraphrase="leftover HTTP resources complained about at interpreter exit; errored RSS pulls vanished unnoticed",
        mixed="return_exceptions made errored RSS pulls vanish unnoticed",
        distractor="""
        U: aiohttp raises ServerDisconnectedError for about 1% of feed fetches
        A: The feed host closes keep-alive connections after 5 s idle while aiohttp's pool keeps them for 15 s; reusing a dead connection fails. Set `TCPConnector(keepalive_timeout=4)` and retry once on ServerDisconnectedError.
        A: The session itself was closed properly here; this was only about keep-alive.
        """,
    ),
    Incident(
        key="py-modulenotfound-ci-rootdir",
        cwd="/home/jonas/code/invoice-svc",
        script="""
        U: tests pass locally but in GitHub Actions: ModuleNotFoundError: No module named 'invoice_svc'
        $ tree -L 2 -I __pycache__
        > .
        > ├── src
        > │   └── invoice_svc
        > ├── tests
        > └── pyproject.toml
        A: src layout. Locally you have the package installed in editable mode (`pip install -e .`) so it is importable; the workflow only runs `pip install -r requirements-dev.txt` and never installs the project itself.
        ~ .github/workflows/ci.yml
        > -      - run: pip install -r requirements-dev.txt
        > +      - run: pip install -r requirements-dev.txt -e .
        A: Alternative would be `pythonpath = ["src"]` in [tool.pytest.ini_options], but installing the package also tests the packaging metadata, so I prefer it.
        """,
        exact="No module named 'invoice_svc'",
        paraphrase="hosted automation can't locate our library though laptop is fine",
        mixed="ModuleNotFoundError on hosted automation though laptop is fine",
    ),
    Incident(
        key="py-flask-app-context",
        cwd="/home/lee/projects/newsletter",
        script="""
        U: the scheduled digest job crashes: RuntimeError: Working outside of application context.
        @ newsletter/jobs.py
        > def send_digest():
        >     subscribers = db.session.scalars(select(Subscriber)).all()
        >     for s in subscribers:
        >         mail.send(render_digest(s))
        A: APScheduler runs `send_digest` in its own thread where no Flask app context is pushed, so `db.session` (Flask-SQLAlchemy) and Flask-Mail have no `current_app`.
        ~ newsletter/jobs.py
        > -def send_digest():
        > -    subscribers = db.session.scalars(select(Subscriber)).all()
        > +def send_digest(app):
        > +    with app.app_context():
        > +        subscribers = db.session.scalars(select(Subscriber)).all()
        A: The scheduler now registers `functools.partial(send_digest, app)`. Ran it manually: 1,204 digests queued.
        """,
        exact="RuntimeError: Working outside of application context",
        paraphrase="periodic roundup emailing blew up lacking web framework globals off the request cycle",
        mixed="APScheduler periodic roundup emailing blew up lacking web framework globals",
    ),
    Incident(
        key="py-pytz-localize-lmt",
        cwd="/home/priya/work/shift-planner",
        script="""
        U: shift times for Amsterdam show 08:40 instead of 09:00, and the offset printed is +00:18
        @ planner/times.py
        > AMS = pytz.timezone("Europe/Amsterdam")
        > def shift_start(day, hour):
        >     return datetime(day.year, day.month, day.day, hour, tzinfo=AMS)
        A: Passing a pytz zone as `tzinfo=` uses the zone's first entry in the tz database, which is Local Mean Time (LMT+0:18 for Amsterdam), not CET. pytz requires `AMS.localize(naive)`. On 3.9+ the simpler fix is zoneinfo, which works with tzinfo= directly.
        ~ planner/times.py
        > -AMS = pytz.timezone("Europe/Amsterdam")
        > +AMS = ZoneInfo("Europe/Amsterdam")
        $ python -c "from planner.times import shift_start; import datetime as d; print(shift_start(d.date(2026,3,30), 9).isoformat())"
        > 2026-03-30T09:00:00+02:00
        """,
        exact="pytz.timezone(\"Europe/Amsterdam\") tzinfo=AMS",
        paraphrase="Dutch rota clock values wrong by twenty minutes owing to historic solar-based reckoning",
        mixed="pytz Dutch rota clock values wrong by twenty minutes owing to historic solar-based reckoning",
        distractor="""
        U: the weekly planner shows Sunday shifts twice on the last weekend of March
        A: The loop adds `timedelta(hours=24)` to an aware datetime in Europe/Amsterdam; across the DST switch that lands on 23:00 the same day. Iterate over dates and build each shift with `datetime.combine(day, time(9), tzinfo=AMS)`.
        A: Not the pytz LMT problem, this one is pure daylight-saving arithmetic.
        """,
    ),
    Incident(
        key="py-regex-catastrophic-backtracking",
        cwd="/home/maya/src/signup-service",
        script="""
        U: a signup request pinned a CPU at 100% for minutes, py-spy shows it inside re
        $ py-spy dump --pid 8812 | head -6
        > Thread 8812 (active): "MainThread"
        >     match (re/__init__.py:166)
        >     validate_email (signup/validators.py:12)
        @ signup/validators.py
        > EMAIL_RE = re.compile(r"^([a-zA-Z0-9_.+-]+)+@([a-zA-Z0-9-]+\\.)+[a-zA-Z]{2,}$")
        A: `([a-zA-Z0-9_.+-]+)+` is a nested quantifier: on an input like "aaaaaaaaaaaaaaaaaaaaaaaaaaaa!" without "@" the engine tries every way of splitting the run between the inner and outer `+`, which is exponential.
        ~ signup/validators.py
        > -EMAIL_RE = re.compile(r"^([a-zA-Z0-9_.+-]+)+@([a-zA-Z0-9-]+\\.)+[a-zA-Z]{2,}$")
        > +EMAIL_RE = re.compile(r"^[a-zA-Z0-9_.+-]+@(?:[a-zA-Z0-9-]+\\.)+[a-zA-Z]{2,}$")
        A: Plus a length cap of 254 before matching. The evil input now fails in 3 µs.
        """,
        exact="EMAIL_RE nested quantifier",
        paraphrase="registration froze at full processor usage: mail address pattern backtracks catastrophically",
        mixed="py-spy: registration froze at full processor usage, mail pattern backtracks catastrophically",
    ),
    Incident(
        key="py-mypy-optional-narrowing",
        cwd="/home/jonas/code/invoice-svc",
        script="""
        U: mypy --strict complains: error: Item "None" of "Customer | None" has no attribute "email"  [union-attr]. But I check for None right above!
        @ src/invoice_svc/notify.py
        > def notify(invoice: Invoice) -> None:
        >     if invoice.customer is None:
        >         log.warning("no customer")
        >     send(invoice.customer.email, render(invoice))
        A: The check logs but does not return, so on the None path execution still reaches `invoice.customer.email`; mypy is right. Also, narrowing an attribute access only holds until the next call, so bind it to a local.
        ~ src/invoice_svc/notify.py
        > -    if invoice.customer is None:
        > -        log.warning("no customer")
        > -    send(invoice.customer.email, render(invoice))
        > +    customer = invoice.customer
        > +    if customer is None:
        > +        log.warning("no customer")
        > +        return
        > +    send(customer.email, render(invoice))
        $ mypy --strict src
        > Success: no issues found in 41 source files
        """,
        exact="Item \"None\" of \"Customer | None\" has no attribute \"email\"",
        paraphrase="static typing tool flags possibly-absent buyer despite guard lacking early exit",
        mixed="union-attr: static typing tool flags possibly-absent buyer despite guard",
    ),
    Incident(
        key="py-asyncio-blocking-call",
        cwd="/home/lee/projects/chat-gateway",
        script="""
        U: websocket clients of the gateway time out randomly, p99 latency spikes to 4 seconds
        $ PYTHONASYNCIODEBUG=1 python -m gateway 2>&1 | grep -m2 "Executing"
        > Executing <Task pending name='Task-311' coro=<handle_message() running at gateway/handlers.py:57>> took 3.912 seconds
        > Executing <Task pending name='Task-402' coro=<handle_message() running at gateway/handlers.py:57>> took 2.207 seconds
        @ gateway/handlers.py
        > async def handle_message(ws, msg):
        >     profile = requests.get(f"{PROFILE_URL}/{msg.user_id}", timeout=5).json()
        A: `requests.get` is synchronous: while it waits, the whole event loop is blocked and no other websocket is served. asyncio debug mode flags any step over 100 ms.
        ~ gateway/handlers.py
        > -    profile = requests.get(f"{PROFILE_URL}/{msg.user_id}", timeout=5).json()
        > +    async with http.get(f"{PROFILE_URL}/{msg.user_id}") as resp:
        > +        profile = await resp.json()
        A: `http` is a shared aiohttp session created at startup. p99 is 38 ms in the load test now.
        """,
        exact="PYTHONASYNCIODEBUG took 3.912 seconds",
        paraphrase="realtime relay lags multiple secs since one plain lookup freezes the cooperative scheduler",
        mixed="PYTHONASYNCIODEBUG: realtime relay lags multiple secs since one plain lookup freezes the cooperative scheduler",
        distractor="""
        U: the gateway drops websocket connections every 60 seconds exactly
        A: The load balancer idle timeout is 60 s and no frames flow on quiet channels. Enable aiohttp's `heartbeat=25` so a ping is sent every 25 s.
        A: Nothing blocks the event loop here; this is an idle disconnect.
        """,
    ),
)
