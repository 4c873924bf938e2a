"""Incidents from data work: embedded and server databases, migrations, queues, search and analytics."""

# Session scripts are transcript text: wrapping their lines would change the messages.
# ruff: noqa: E501

from __future__ import annotations

from bench.quality.incident import Incident

INCIDENTS: tuple[Incident, ...] = (
    Incident(
        key="db-duckdb-lock-conflict",
        cwd="/home/sam/src/vault-indexer",
        script="""
        U: `aivault index` fails right away: IO Error: Could not set lock on file "/home/sam/.local/share/aivault/index.duckdb": Conflicting lock is held in /usr/bin/python3.11 (PID 48211)
        A: DuckDB allows one read-write process per database file. Something else has it open for writing; let me find out what.
        $ ps -o pid,etime,args -p 48211
        >     PID     ELAPSED COMMAND
        >   48211  3-02:11:40 /usr/bin/python3.11 -m aivault.cli serve
        A: A daemon from three days ago still holds the write lock. `aivault index` should talk to it over RPC instead of opening the file itself; the CLI only does that when the socket answers, and this daemon's socket file was deleted by a tmp cleaner.
        A: Short term: stop the old daemon (`kill -TERM 48211`). Proper fix: the CLI now checks the pid file lock before opening the database and, when a daemon holds it but the socket is gone, prints how to stop it instead of the raw DuckDB error.
        ~ aivault/cli.py
        > +    if daemon_holds_lock(home) and not rpc_available(home):
        > +        raise SystemExit(f"a daemon (pid {pid}) owns {home.db_path} but does not answer; stop it first")
        U: killed it and index works. thanks
        """,
        exact="IO Error: Could not set lock on file",
        paraphrase="launching the transcript crawler failed because a stale long-lived instance kept exclusive grip on the embedded analytics engine",
        mixed="index.duckdb kept under exclusive grip by a stale long-lived instance",
        distractor="""
        U: index.duckdb is 9 GB for only 2 GB of transcripts, why?
        A: DuckDB does not return freed blocks to the OS after deletes; the file keeps its size until a CHECKPOINT can truncate the tail, and our old segments were never merged. Running the compaction and `CHECKPOINT` shrank it to 2.6 GB.
        $ duckdb index.duckdb "CHECKPOINT; PRAGMA database_size;"
        > │ index │ 2.6 GiB │
        A: No lock problem here, just file growth.
        """,
    ),
    Incident(
        key="db-sqlite-database-locked",
        cwd="/home/lee/projects/newsletter",
        script="""
        U: under load the app throws sqlite3.OperationalError: database is locked
        A: SQLite allows one writer at a time. In the default rollback-journal mode readers also block the writer, and Python's sqlite3 waits only 5 seconds (`timeout=5.0`) before raising.
        $ sqlite3 instance/newsletter.db "PRAGMA journal_mode;"
        > delete
        A: Switch to WAL so readers never block the writer, and make writers wait longer instead of failing.
        ~ newsletter/db.py
        > -    conn = sqlite3.connect(DB_PATH)
        > +    conn = sqlite3.connect(DB_PATH, timeout=30)
        > +    conn.execute("PRAGMA journal_mode=WAL")
        > +    conn.execute("PRAGMA busy_timeout=30000")
        A: Also the subscribe handler kept a transaction open while sending the confirmation email; commit before the SMTP call, so the write lock is held for milliseconds.
        $ locust -f load/subscribe.py --headless -u 50 -t 60s | tail -1
        >   Aggregated  12402  0(0.00%)
        """,
        exact="sqlite3.OperationalError: database is locked",
        paraphrase="simultaneous registrations get rejected by the embedded engine while a welcome mail goes out",
        mixed="journal_mode=WAL so concurrent signups stop being refused",
        distractor="""
        U: sqlite3.OperationalError: attempt to write a readonly database after deploying
        A: The deploy runs as www-data but instance/newsletter.db and its directory belong to root; SQLite also needs write access to the directory for the -wal and -shm files. chown the directory.
        A: A permissions problem, no lock contention involved.
        """,
    ),
    Incident(
        key="db-postgres-deadlock",
        cwd="/home/priya/work/claims-api",
        script="""
        U: we get ERROR: deadlock detected a few times a day in the payout job
        $ grep -A4 "deadlock detected" /var/log/postgresql/postgresql-16-main.log | head -5
        > ERROR:  deadlock detected
        > DETAIL:  Process 9121 waits for ShareLock on transaction 88120; blocked by process 9135.
        > 	Process 9135 waits for ShareLock on transaction 88118; blocked by process 9121.
        > CONTEXT:  while updating tuple (412,7) in relation "accounts"
        A: Two payout workers update the same pair of accounts in opposite order: A→B transfers lock A then B, B→A transfers lock B then A.
        ~ claims/payouts.py
        > -    debit(src); credit(dst)
        > +    for acct_id in sorted((src.id, dst.id)):
        > +        db.execute(select(Account).where(Account.id == acct_id).with_for_update())
        > +    debit(src); credit(dst)
        A: Locking both rows in ascending id order up front makes the order consistent. The job also retries once on `DeadlockDetected`, which Postgres documents as the expected handling.
        """,
        exact="ERROR: deadlock detected ShareLock on transaction",
        paraphrase="parallel money movements stall each other cyclically, grabbing ledger entries in inconsistent sequence",
        mixed="DeadlockDetected: parallel money movements stall each other cyclically",
        distractor="""
        U: the payout job fails with ERROR: canceling statement due to lock timeout
        A: A long-running report query holds a lock on accounts while the job's `lock_timeout = '2s'` expires. The report now runs on the read replica.
        A: Only one side waits here; it is not a deadlock cycle.
        """,
    ),
    Incident(
        key="db-postgres-create-index-blocks",
        cwd="/home/jonas/code/shop-backend",
        script="""
        U: during the deploy the site hung for 6 minutes, all order inserts were waiting. The migration only adds an index!
        @ orders/migrations/0044_order_created_idx.py
        > operations = [
        >     migrations.AddIndex("order", models.Index(fields=["created_at"], name="order_created_idx")),
        > ]
        A: A plain CREATE INDEX takes a SHARE lock on orders_order, which blocks INSERT/UPDATE/DELETE for the whole build (6 minutes on 80M rows).
        ~ orders/migrations/0044_order_created_idx.py
        > +    atomic = False
        > -    migrations.AddIndex("order", models.Index(fields=["created_at"], name="order_created_idx")),
        > +    AddIndexConcurrently("order", models.Index(fields=["created_at"], name="order_created_idx")),
        A: CREATE INDEX CONCURRENTLY builds without blocking writes (it cannot run in a transaction, hence `atomic = False`). If it fails it leaves an INVALID index to drop before retrying. I added `squawk`, a Postgres migration linter, over the sqlmigrate output in CI.
        """,
        exact="AddIndexConcurrently order_created_idx",
        paraphrase="storefront stalled for ages during a release as the fresh lookup structure prevented purchases",
        mixed="AddIndex: storefront stalled for ages during a release, fresh lookup structure prevented purchases",
    ),
    Incident(
        key="db-postgres-seq-scan-missing-index",
        cwd="/home/priya/work/claims-api",
        script="""
        U: GET /customers/{id}/claims takes 3 s now that we have 20M claims
        $ psql claims -c "EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM claims WHERE customer_id = 88121 ORDER BY filed_at DESC LIMIT 20"
        > Limit  (cost=0.00..412881.20 rows=20) (actual time=2911.402..2911.410 rows=20 loops=1)
        >   ->  Seq Scan on claims  (cost=0.00..1811201.00 rows=88 width=412) (actual time=2911.399..2911.405 rows=20 loops=1)
        >         Filter: (customer_id = 88121)
        >         Rows Removed by Filter: 20118221
        A: Sequential scan over all 20M rows: there is no index on customer_id (foreign keys do not get one automatically in Postgres).
        $ psql claims -c "CREATE INDEX CONCURRENTLY claims_customer_filed_idx ON claims (customer_id, filed_at DESC)"
        > CREATE INDEX
        A: The composite index also serves the ORDER BY, so Postgres reads exactly 20 index entries. The endpoint is at 4 ms.
        """,
        exact="Seq Scan on claims Rows Removed by Filter",
        paraphrase="per-client history page needs several secs as the planner walks every single record",
        mixed="customer_id: per-client history page needs several secs as the planner walks every single record",
        distractor="""
        U: the claims search by lower(email) is slow even though email has an index
        A: The query filters on `lower(email)`, and a btree on `email` cannot serve an expression. Create an expression index `ON customers (lower(email))`, or use citext.
        A: The index existed; it just did not match the expression.
        """,
    ),
    Incident(
        key="db-postgres-too-many-clients",
        cwd="/srv/apps/pdf-service",
        script="""
        U: after scaling the API to 12 pods we get FATAL: sorry, too many clients already
        $ psql -c "SHOW max_connections" -c "SELECT count(*), state FROM pg_stat_activity GROUP BY state"
        >  max_connections
        > -----------------
        >  100
        >  count | state
        >     91 | idle
        >      9 | active
        A: Each pod runs SQLAlchemy with pool_size=5 and max_overflow=10, up to 15 connections per pod, 180 in total, while 91 connections sit idle. Postgres connections are processes and 100 is the limit.
        A: Put PgBouncer in transaction pooling mode in front: pods connect to it, and it multiplexes onto 40 server connections.
        ~ deploy/pgbouncer.ini
        > +pool_mode = transaction
        > +default_pool_size = 40
        > +max_client_conn = 1000
        A: With transaction pooling we must not use session state (SET, advisory locks, server-side prepared statements); I set `prepare_threshold=None` in the psycopg settings for that.
        """,
        exact="FATAL: sorry, too many clients already",
        paraphrase="after replicating the backend horizontally the relational engine refuses newcomers as each copy hoards unused links",
        mixed="max_connections: relational engine refuses newcomers as each copy hoards unused links",
    ),
    Incident(
        key="db-mysql-utf8mb4-emoji",
        cwd="/home/tom/work/reviews-php",
        script="""
        U: saving a product review with an emoji fails: SQLSTATE[HY000]: General error: 1366 Incorrect string value: '\\xF0\\x9F\\x98\\x80' for column 'body' at row 1
        $ mysql reviews -e "SHOW CREATE TABLE reviews\\G" | grep -i charset
        > ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb3 COLLATE=utf8mb3_general_ci
        A: MySQL's `utf8` (utf8mb3) stores at most 3 bytes per character; emoji need 4 bytes. The table and the connection need utf8mb4.
        $ mysql reviews -e "ALTER TABLE reviews CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci"
        > Query OK, 120482 rows affected (41.20 sec)
        ~ config/database.php
        > -            'charset' => 'utf8',
        > +            'charset' => 'utf8mb4',
        > +            'collation' => 'utf8mb4_0900_ai_ci',
        A: 😀 saves and reads back correctly. The index on `title` (varchar 255) still fits in InnoDB's 3072-byte limit with 4-byte characters.
        """,
        exact="Incorrect string value: '\\xF0\\x9F\\x98\\x80' for column 'body'",
        paraphrase="customer feedback containing smiley pictograms won't persist since the legacy encoding handles only basic multilingual plane",
        mixed="utf8mb4: customer feedback containing smiley pictograms won't persist",
        distractor="""
        U: reviews sorted by title put "Émile" after "Zebra"
        A: The column collation is utf8mb4_bin, which compares code points. Switch to utf8mb4_0900_ai_ci (accent-insensitive) for sorting by title.
        A: Storing worked fine; only the collation order was off.
        """,
    ),
    Incident(
        key="db-redis-oom-maxmemory",
        cwd="/srv/apps/session-store",
        script="""
        U: logins fail with redis.exceptions.ResponseError: OOM command not allowed when used memory > 'maxmemory'.
        $ redis-cli INFO memory | grep -E "used_memory_human|maxmemory_human|maxmemory_policy"
        > used_memory_human:1.00G
        > maxmemory_human:1.00G
        > maxmemory_policy:noeviction
        A: With `noeviction` Redis refuses writes once maxmemory is reached. The session keys are written without TTL, so they pile up forever.
        $ redis-cli --scan --pattern 'sess:*' | head -1000 | xargs -n1 redis-cli TTL | sort | uniq -c | head -2
        >    1000 -1
        ~ sessions/store.py
        > -        r.set(f"sess:{sid}", payload)
        > +        r.set(f"sess:{sid}", payload, ex=SESSION_TTL_S)
        A: New sessions expire after 14 days, and I set `maxmemory-policy volatile-lru` so keys with a TTL get evicted under pressure instead of failing writes. A one-off script set TTLs on the 3.1M existing keys.
        """,
        exact="OOM command not allowed when used memory > 'maxmemory'",
        paraphrase="authentication breaks since the in-RAM cache filled up; visitor data saved without lifetime",
        mixed="noeviction: cache filled up; visitor data saved without lifetime",
        distractor="""
        U: redis latency spikes to 800 ms every few minutes
        $ redis-cli --latency-history -i 5 | tail -2
        > min: 0, max: 812, avg: 3.20 (1221 samples)
        A: The spikes line up with BGSAVE forks on a 6 GB instance with transparent huge pages enabled. Disable THP and move the RDB snapshots to the replica.
        A: Memory was not full here; it was fork latency.
        """,
    ),
    Incident(
        key="kafka-commit-failed-rebalance",
        cwd="/home/omar/work/events-consumer",
        script="""
        U: the consumer keeps rebalancing and logs CommitFailedException: Commit cannot be completed since the group has already rebalanced and assigned the partitions to another member
        A: That happens when the time between two poll() calls exceeds max.poll.interval.ms (default 300000 ms): the broker considers the consumer dead and reassigns its partitions.
        $ grep -E "max.poll|Processed batch" consumer.log | tail -3
        > max.poll.records = 500
        > Processed batch of 500 in 412331 ms
        > Processed batch of 500 in 398870 ms
        A: A batch of 500 records takes ~400 s because each record calls the enrichment API synchronously. Reduce the batch and bound the time per batch.
        ~ src/main/resources/consumer.properties
        > -max.poll.records=500
        > +max.poll.records=50
        > +max.poll.interval.ms=600000
        A: And enrichment calls now run 16 at a time; a batch of 50 takes ~6 s. No more rebalances overnight.
        """,
        exact="CommitFailedException group has already rebalanced",
        paraphrase="stream reader repeatedly expelled from its cohort, since handling each chunk outlasts the allowed heartbeat window",
        mixed="max.poll.records lowered so the stream reader stops getting kicked out",
    ),
    Incident(
        key="es-total-fields-limit",
        cwd="/home/omar/work/log-search",
        script="""
        U: indexing log events into Elasticsearch fails: illegal_argument_exception: Limit of total fields [1000] has been exceeded while adding new fields [3]
        $ curl -s localhost:9200/app-logs-2026.03.14/_mapping | jq '.[].mappings.properties.context.properties | keys | length'
        > 994
        A: The `context` object contains arbitrary user-provided keys (request headers, feature flags), and dynamic mapping creates a field for every new key: a mapping explosion.
        ~ templates/app-logs.json
        > -        "context": { "type": "object" }
        > +        "context": { "type": "flattened" }
        A: A `flattened` field indexes the whole object as one field with keyword leaves, so new keys no longer change the mapping. Applies from tomorrow's index; today's I rolled over manually.
        """,
        exact="Limit of total fields [1000] has been exceeded",
        paraphrase="full-text cluster rejects incoming entries as free-form attributes blow up the schema",
        mixed="flattened: full-text cluster rejects incoming entries as free-form attributes blow up the schema",
    ),
    Incident(
        key="mongo-e11000-upsert-race",
        cwd="/home/tom/work/reviews-php",
        script="""
        U: the votes endpoint sometimes fails with E11000 duplicate key error collection: reviews.votes index: review_id_1_user_id_1 dup key
        @ src/Votes.php
        > $votes->updateOne(
        >     ['review_id' => $rid, 'user_id' => $uid],
        >     ['$set' => ['value' => $value]],
        >     ['upsert' => true]
        > );
        A: Two concurrent upserts for the same (review_id, user_id) both find no document and both try to insert; the unique index rejects the second. MongoDB documents this race for upserts on unique keys.
        ~ src/Votes.php
        > +try {
        >  $votes->updateOne(...);
        > +} catch (BulkWriteException $e) {
        > +    if ($e->getCode() !== 11000) throw $e;
        > +    $votes->updateOne(['review_id' => $rid, 'user_id' => $uid], ['$set' => ['value' => $value]]);
        > +}
        A: On the retry the document exists, so it is a plain update. Double clicks in the UI were the trigger; I also debounced the button.
        """,
        exact="E11000 duplicate key error collection: reviews.votes",
        paraphrase="liking twice quickly makes the NoSQL create-or-replace collide",
        mixed="upsert: liking twice quickly makes the NoSQL create-or-replace collide",
    ),
    Incident(
        key="db-postgres-sequence-out-of-sync",
        cwd="/home/priya/work/claims-api",
        script="""
        U: after importing the legacy customers, creating a new customer fails: duplicate key value violates unique constraint "customers_pkey" DETAIL: Key (id)=(7) already exists.
        A: The import inserted explicit ids (1..48120) with COPY, which does not advance the serial sequence; the sequence still hands out 7, 8, ...
        $ psql claims -c "SELECT last_value FROM customers_id_seq" -c "SELECT max(id) FROM customers"
        >  last_value
        >           6
        >   max
        >  48120
        $ psql claims -c "SELECT setval('customers_id_seq', (SELECT max(id) FROM customers))"
        >  setval
        >  48120
        A: Fixed. I added the setval for every imported table to the end of the import script.
        """,
        exact="duplicate key value violates unique constraint \"customers_pkey\"",
        paraphrase="after bulk loading historic clients, adding another collides on identity since the auto-increment counter lagged",
        mixed="setval after bulk loading old clients left the auto-increment counter behind",
        distractor="""
        U: duplicate key value violates unique constraint "customers_email_key" when a customer signs up twice quickly
        A: Two requests pass the "email exists?" check before either inserts. Use INSERT ... ON CONFLICT (email) DO NOTHING and return the existing row.
        A: The primary key sequence is fine here; it is a check-then-insert race on email.
        """,
    ),
    Incident(
        key="sql-not-in-null",
        cwd="/home/sam/src/analytics-sql",
        script="""
        U: this query returns zero rows but I know there are customers without orders: SELECT id FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)
        $ psql analytics -c "SELECT count(*) FROM orders WHERE customer_id IS NULL"
        >  count
        >     14
        A: 14 orders have NULL customer_id (guest checkouts). `x NOT IN (..., NULL)` evaluates to NULL instead of TRUE for every x, so nothing qualifies. Three-valued logic.
        ~ reports/inactive_customers.sql
        > -SELECT id FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)
        > +SELECT c.id FROM customers c
        > +WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id)
        A: NOT EXISTS is NULL-safe and usually plans as an anti-join too. 3,211 inactive customers.
        """,
        exact="NOT IN (SELECT customer_id FROM orders)",
        paraphrase="search for dormant shoppers came back blank since anonymous purchases lack an owner",
        mixed="NULL: search for dormant shoppers came back blank since anonymous purchases lack an owner",
    ),
    Incident(
        key="db-postgres-stale-statistics",
        cwd="/home/priya/work/claims-api",
        script="""
        U: after the pg_upgrade from 14 to 16 everything is slow, queries that took 5 ms take seconds
        $ psql claims -c "SELECT relname, last_analyze, last_autoanalyze FROM pg_stat_user_tables ORDER BY n_live_tup DESC LIMIT 3"
        >  relname  | last_analyze | last_autoanalyze
        >  claims   |              |
        >  payouts  |              |
        >  accounts |              |
        A: pg_upgrade does not carry over optimizer statistics; without them the planner guesses row counts and picks nested loops over huge tables. The upgrade guide says to run vacuumdb --analyze-in-stages afterwards.
        $ vacuumdb --all --analyze-in-stages -j 4
        > vacuumdb: processing database "claims": Generating minimal optimizer statistics (1 target)
        > vacuumdb: processing database "claims": Generating default (full) optimizer statistics
        A: Latencies back to normal. I added the step to our upgrade runbook.
        """,
        exact="vacuumdb --analyze-in-stages",
        paraphrase="after a major relational engine version jump, all lookups crawled since cardinality estimates were absent",
        mixed="pg_upgrade: all lookups crawled since cardinality estimates were absent",
    ),
    Incident(
        key="alembic-multiple-heads",
        cwd="/home/maya/src/billing-core",
        script="""
        U: alembic upgrade head fails: Multiple head revisions are present for given argument 'head'; please specify a specific target revision, '<branchname>@head' to narrow to a specific head, or 'heads' for all heads
        $ alembic heads
        > 3c9a1f0d2e44 (head)
        > 8b12ce77f310 (head)
        A: Two feature branches each created a revision on top of 71d0; after merging both, the history has two heads.
        $ alembic merge -m "merge invoices and refunds heads" 3c9a1f0d2e44 8b12ce77f310
        >   Generating /home/maya/src/billing-core/migrations/versions/a41f9c2b7d10_merge_invoices_and_refunds_heads.py ...  done
        $ alembic upgrade head
        > INFO  [alembic.runtime.migration] Running upgrade 3c9a1f0d2e44, 8b12ce77f310 -> a41f9c2b7d10, merge invoices and refunds heads
        A: A CI check running `alembic heads | wc -l` == 1 would catch this at PR time; added.
        """,
        exact="Multiple head revisions are present for given argument 'head'",
        paraphrase="SQLAlchemy schema tooling refused to apply changes after parallel efforts diverged into sibling tips",
        mixed="alembic refused to apply changes after parallel efforts diverged into sibling tips",
    ),
    Incident(
        key="prisma-pool-timeout-serverless",
        cwd="/home/ana/src/storefront",
        script="""
        U: on Vercel we randomly get PrismaClientInitializationError... no wait, it's: Timed out fetching a new connection from the connection pool. (Current connection pool timeout: 10, connection limit: 5) P2024
        A: Each serverless function instance creates its own PrismaClient with a pool of 5; with hundreds of concurrent instances the database runs out of connections and the pools wait.
        @ lib/db.ts
        > export const prisma = new PrismaClient();
        A: Two fixes: reuse one client per instance (global cache in dev hot reload), and connect through a pooler. Neon provides a pgbouncer endpoint; use it with `connection_limit=1` per instance.
        ~ .env.production
        > -DATABASE_URL=postgres://app@ep-cool-sea.neon.tech/shop
        > +DATABASE_URL=postgres://app@ep-cool-sea-pooler.neon.tech/shop?pgbouncer=true&connection_limit=1
        > +DIRECT_URL=postgres://app@ep-cool-sea.neon.tech/shop
        A: DIRECT_URL is for migrations, which need a session connection.
        """,
        exact="Timed out fetching a new connection from the connection pool P2024",
        paraphrase="cloud lambdas starve the hosted relational engine as each cold container opens several links",
        mixed="PrismaClient: cloud lambdas starve the hosted relational engine",
    ),
    Incident(
        key="db-lost-update-for-update",
        cwd="/home/jonas/code/shop-backend",
        script="""
        U: stock went negative for a hot item during the flash sale, we sold 212 units of 150
        @ inventory/services.py
        > def reserve(sku, qty):
        >     item = Stock.objects.get(sku=sku)
        >     if item.available < qty:
        >         raise OutOfStock(sku)
        >     item.available -= qty
        >     item.save()
        A: Read-modify-write without a lock: concurrent requests read the same `available`, each subtracts and saves, and the updates overwrite each other (lost update) while the check passes for all of them.
        ~ inventory/services.py
        > -    item = Stock.objects.get(sku=sku)
        > +    updated = Stock.objects.filter(sku=sku, available__gte=qty).update(available=F("available") - qty)
        > +    if not updated:
        > +        raise OutOfStock(sku)
        A: A single conditional UPDATE is atomic in the database. `select_for_update()` inside `transaction.atomic()` would also work but holds the row lock longer.
        """,
        exact="item.available -= qty",
        paraphrase="limited-time promotion oversold a popular product since simultaneous purchases clobbered the same quantity",
        mixed="select_for_update: limited-time promotion oversold a popular product",
        distractor="""
        U: the stock count in the admin lags the real stock by a few minutes
        A: The admin list reads from the read replica, and replication lag during the sale was 2-3 minutes. Read stock from the primary in the admin.
        A: Stock.available itself was right, only the replica was behind.
        """,
    ),
    Incident(
        key="spark-parquet-type-mismatch",
        cwd="/home/sam/src/lakehouse-jobs",
        script="""
        U: the Spark job reading the events table fails: org.apache.spark.sql.execution.QueryExecutionException: Parquet column cannot be converted in file s3://lake/events/dt=2026-03-02/part-00017.parquet. Column: [user_id], Expected: int, Found: INT64
        A: Files written before March 2 have user_id as INT32; the producer switched to INT64 when ids passed 2^31. Spark takes the schema from the table definition (int) and refuses to narrow the 64-bit files.
        $ spark-sql -e "DESCRIBE events" | grep user_id
        > user_id	int
        A: Widen the table column to bigint; reading INT32 files as bigint is allowed, the reverse is not.
        $ spark-sql -e "ALTER TABLE events ALTER COLUMN user_id TYPE bigint"
        > Time taken: 1.204 seconds
        A: With Delta/Iceberg this would be a schema evolution entry; on this plain Hive table the ALTER plus `spark.sql.parquet.enableVectorizedReader=false` for the old files was needed once for the backfill.
        """,
        exact="Parquet column cannot be converted Expected: int, Found: INT64",
        paraphrase="distributed compute step breaks since newer shards keep the account identifier as a wider integer than the catalog declares",
        mixed="INT64: distributed compute step breaks, wider integer than the catalog declares",
    ),
    Incident(
        key="bigquery-partition-filter-cost",
        cwd="/home/sam/src/analytics-sql",
        script="""
        U: finance asks why our BigQuery bill jumped $4k last week
        $ bq query --nouse_legacy_sql "SELECT user_email, query, total_bytes_billed/1e12 AS tb FROM region-eu.INFORMATION_SCHEMA.JOBS WHERE creation_time > TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 7 DAY) ORDER BY tb DESC LIMIT 2"
        > sam@acme.io   SELECT * FROM events WHERE DATE(event_ts) = '2026-03-10'   4.12
        > looker@acme.io   SELECT ... FROM events WHERE DATE(event_ts) = ...   3.88
        A: `events` is partitioned on `_PARTITIONDATE` (ingestion time), not on event_ts, so a filter on event_ts prunes nothing and every query scans the full 4 TB. The Looker dashboard runs it hourly.
        $ bq update --require_partition_filter --time_partitioning_field event_ts analytics.events_v2
        > Table 'acme:analytics.events_v2' successfully updated.
        A: I created events_v2 partitioned by event_ts with require_partition_filter, backfilled it, and pointed the dashboard there: that query now bills 11 GB.
        """,
        exact="require_partition_filter event_ts",
        paraphrase="cloud warehouse invoice ballooned because BI charts scanned four terabytes repeatedly without pruning",
        mixed="_PARTITIONDATE: cloud warehouse invoice ballooned, BI charts scanned four terabytes repeatedly",
    ),
    Incident(
        key="clickhouse-too-many-parts",
        cwd="/home/omar/work/log-search",
        script="""
        U: inserts into ClickHouse fail with DB::Exception: Too many parts (300). Merges are processing significantly slower than inserts. (TOO_MANY_PARTS)
        $ clickhouse-client -q "SELECT table, count() FROM system.parts WHERE active GROUP BY table ORDER BY 2 DESC LIMIT 1"
        > http_logs	2981
        A: Every log shipper pod inserts each event as its own INSERT, several hundred per second; each INSERT creates a new part, and the background merges cannot keep up.
        ~ shipper/clickhouse_sink.go
        > -    return s.conn.Exec(ctx, insertSQL, ev.Fields()...)
        > +    s.buf = append(s.buf, ev)
        > +    if len(s.buf) >= 50_000 || time.Since(s.lastFlush) > 2*time.Second {
        > +        return s.flush(ctx)
        > +    }
        A: Batches of up to 50k rows or every 2 s. Alternatively `async_insert=1` lets the server buffer small inserts; I enabled that as well for the ad-hoc writers.
        """,
        exact="Too many parts (300). Merges are processing significantly slower than inserts",
        paraphrase="column-oriented warehouse rejected ingestion since each tiny record landed separately and compaction fell behind",
        mixed="TOO_MANY_PARTS: warehouse rejected ingestion, each tiny record landed separately",
        distractor="""
        U: ClickHouse queries over http_logs got slow although the parts count is fine
        A: The ORDER BY key is (timestamp) but every dashboard filters by service first; primary index pruning does nothing. New table with ORDER BY (service, timestamp) and a materialized view.
        A: Inserts were fine; it was the sorting key.
        """,
    ),
    Incident(
        key="db-postgres-wraparound",
        cwd="/home/priya/work/claims-api",
        script="""
        U: postgres log warns: WARNING: database "claims" must be vacuumed within 11482911 transactions HINT: To avoid a database shutdown, execute a database-wide VACUUM in that database.
        $ psql claims -c "SELECT relname, age(relfrozenxid) FROM pg_class WHERE relkind='r' ORDER BY 2 DESC LIMIT 2" -c "SELECT pid, xact_start, state FROM pg_stat_activity WHERE xact_start < now() - interval '1 day'"
        >  audit_log | 2135011822
        >  pid  |          xact_start           | state
        >  4411 | 2026-02-20 03:00:01.12+00     | idle in transaction
        A: A connection has been "idle in transaction" for three weeks (a crashed export script). Its snapshot prevents VACUUM from freezing old rows, so the transaction id age approaches the 2^31 wraparound limit.
        $ psql claims -c "SELECT pg_terminate_backend(4411)" && vacuumdb --freeze --table audit_log claims
        > vacuumdb: vacuuming database "claims"
        A: Age is back to 50M. I set `idle_in_transaction_session_timeout = '15min'` so this cannot happen silently again.
        """,
        exact="must be vacuumed within 11482911 transactions",
        paraphrase="relational engine threatened halting since a forgotten client pinned ancient visibility and cleanup stalled",
        mixed="relfrozenxid: engine threatened halting since a forgotten client pinned ancient visibility",
    ),
    Incident(
        key="redis-lock-expired-double-run",
        cwd="/srv/apps/media-pipeline",
        script="""
        U: the monthly invoice run sent duplicate emails to 300 customers although we use a Redis lock
        @ pipeline/locks.py
        > def with_lock(name, fn):
        >     if r.set(f"lock:{name}", "1", nx=True, ex=600):
        >         try:
        >             return fn()
        >         finally:
        >             r.delete(f"lock:{name}")
        A: The lock expires after 600 s but the run took 25 minutes. After 10 minutes a second worker acquired the expired lock and started sending too; then the first worker's `delete` even removed the second worker's lock.
        ~ pipeline/locks.py
        > -    if r.set(f"lock:{name}", "1", nx=True, ex=600):
        > +    token = secrets.token_hex(16)
        > +    if r.set(f"lock:{name}", token, nx=True, ex=600):
        > +        renew = start_renewal(name, token, every=200)
        A: A token identifies the owner and a Lua compare-and-delete releases only our own lock; a heartbeat extends it while the job runs. The invoice table also got a unique (customer, month) key so a duplicate cannot be sent even if locking fails.
        """,
        exact='r.set(f"lock:{name}", "1", nx=True, ex=600)',
        paraphrase="billing mails went out twice to hundreds of people because the mutual exclusion lapsed during processing",
        mixed="nx=True: billing mails went out twice to hundreds of people",
    ),
    Incident(
        key="sql-injection-fstring",
        cwd="/home/lee/projects/notes-api",
        script="""
        U: security scan flagged the search endpoint, can you check?
        @ notes/search.py
        > def search(term):
        >     return db.execute(f"SELECT id, title FROM notes WHERE title LIKE '%{term}%'").fetchall()
        $ curl -s "localhost:8000/search?q=x%27%20UNION%20SELECT%20id,%20password_hash%20FROM%20users--" | head -c 120
        > [{"id":1,"title":"$argon2id$v=19$m=65536,t=3,p=4$..."}]
        A: Confirmed SQL injection: the term is interpolated into the SQL string, and a UNION returns password hashes.
        ~ notes/search.py
        > -    return db.execute(f"SELECT id, title FROM notes WHERE title LIKE '%{term}%'").fetchall()
        > +    pattern = "%" + term.replace("\\\\", "\\\\\\\\").replace("%", "\\\\%").replace("_", "\\\\_") + "%"
        > +    return db.execute("SELECT id, title FROM notes WHERE title LIKE ? ESCAPE '\\\\'", (pattern,)).fetchall()
        A: Bound parameter plus escaping of LIKE wildcards. I grepped for other f-string queries: none left. Worth rotating credentials since the endpoint was public.
        """,
        exact="SQL injection UNION returns password hashes",
        paraphrase="audit finding: the lookup box let attackers splice their own database statements and exfiltrate secrets",
        mixed="UNION: the lookup box let attackers splice their own database statements",
    ),
    Incident(
        key="duckdb-oom-join",
        cwd="/home/sam/src/analytics-sql",
        script="""
        U: the sessionization query in DuckDB dies: Out of Memory Error: failed to allocate data of size 256.0 MiB (12.4 GiB/12.4 GiB used)
        A: The query joins 900M page views with themselves on user_id within 30 minutes; the hash join build side does not fit. DuckDB can spill to disk, but only if a temp directory is configured for the in-memory database.
        $ duckdb -c "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
        > │ 12.4 GiB │  │
        A: `:memory:` database with no temp_directory: nothing can spill. Also the self-join is unnecessary: a window function with LAG computes session boundaries in one pass.
        ~ sql/sessionize.sql
        > +SET temp_directory = '/mnt/scratch/duckdb_tmp';
        > +WITH gaps AS (SELECT *, ts - LAG(ts) OVER (PARTITION BY user_id ORDER BY ts) > INTERVAL 30 MINUTE AS new_session FROM page_views)
        A: Runs in 4 minutes with a 5 GB peak.
        """,
        exact="Out of Memory Error: failed to allocate data of size 256.0 MiB",
        paraphrase="visit grouping crashed the embedded columnar engine since a huge pairing could not overflow to storage",
        mixed="temp_directory: visit grouping crashed, huge pairing could not overflow to storage",
        distractor="""
        U: DuckDB query on the page_views parquet files is slow, 3 minutes for a count by day
        A: The files are 40k small parquet files of 200 KB each; DuckDB spends most of the time opening them. Compacting into 512 MB files brought it to 6 s.
        A: No out of memory error here, just too many small files.
        """,
    ),
    Incident(
        key="pandas-dtype-leading-zeros",
        cwd="/home/priya/work/vendor-import",
        script="""
        U: zip codes like 02134 show up as 2134 after the import, and pandas prints DtypeWarning: Columns (7) have mixed types. Specify dtype option on import or set low_memory=False.
        A: pandas infers column 7 (postal_code) as numbers in some chunks and strings in others; numeric parsing drops the leading zero.
        ~ vendor_import/reader.py
        > -    df = pd.read_csv(path, sep=";")
        > +    df = pd.read_csv(path, sep=";", dtype={"postal_code": "string", "phone": "string", "vat_id": "string"})
        $ python -c "import vendor_import.reader as r; print(r.load('data/suppliers_2026_03.csv').postal_code.head(3).tolist())"
        > ['02134', '10115', '75001']
        A: Identifiers that look like numbers (postal codes, phone numbers, VAT ids) should always be read as strings.
        """,
        exact="DtypeWarning: Columns (7) have mixed types",
        paraphrase="Boston postcodes lose their initial 0 after ingesting a spreadsheet since the library guesses integers",
        mixed="dtype: Boston postcodes lose their initial 0 since the library guesses integers",
    ),
    Incident(
        key="postgres-jsonb-gin",
        cwd="/home/tom/work/orders-api",
        script="""
        U: filtering orders by a key inside the metadata JSONB column takes 4 seconds: WHERE metadata @> '{"channel": "partner"}'
        $ psql orders -c "EXPLAIN ANALYZE SELECT id FROM orders WHERE metadata @> '{\\"channel\\": \\"partner\\"}'" | head -3
        > Seq Scan on orders  (cost=0.00..1412022.10 rows=12000 width=8) (actual time=0.061..4021.771 rows=9812 loops=1)
        >   Filter: (metadata @> '{"channel": "partner"}'::jsonb)
        $ psql orders -c "CREATE INDEX CONCURRENTLY orders_metadata_gin ON orders USING gin (metadata jsonb_path_ops)"
        > CREATE INDEX
        A: jsonb_path_ops GIN indexes support the containment operator `@>` and are smaller than the default jsonb_ops. Bitmap index scan now, 9 ms.
        A: If "channel" is queried this often it deserves a real column; it is in the backlog.
        """,
        exact="orders_metadata_gin jsonb_path_ops",
        paraphrase="querying purchases by a property within the semi-structured blob was slow; an inverted lookup structure made it instant",
        mixed="GIN: querying purchases by a property within the semi-structured blob was slow",
    ),
    Incident(
        key="dynamodb-hot-partition",
        cwd="/home/omar/work/events-consumer",
        script="""
        U: DynamoDB writes throttle with ProvisionedThroughputExceededException although the table is at 20% of its provisioned WCU
        $ aws cloudwatch get-metric-statistics --namespace AWS/DynamoDB --metric-name WriteThrottleEvents --dimensions Name=TableName,Value=device_events --statistics Sum --period 300 --start-time 2026-03-14T08:00Z --end-time 2026-03-14T09:00Z | jq '.Datapoints | length'
        > 12
        A: The partition key is `event_date`, so all of today's writes go to a single partition, which is capped at 1,000 WCU regardless of the table total. A hot partition.
        A: New key design: partition key `device_id#shard` where shard = hash(event_id) % 10, sort key `ts`; readers query the 10 shards in parallel for a device.
        ~ consumer/dynamo.py
        > -        "pk": ev.date.isoformat(),
        > +        "pk": f"{ev.device_id}#{zlib.crc32(ev.id.encode()) % 10}",
        A: Throttling is gone in the replay test at 3× today's peak.
        """,
        exact="ProvisionedThroughputExceededException device_events",
        paraphrase="managed NoSQL service rejects bursts although overall capacity is barely used, since inserts concentrate on one bucket",
        mixed="event_date: NoSQL service rejects bursts since inserts concentrate on one bucket",
    ),
    Incident(
        key="mysql-replica-lag-read-your-writes",
        cwd="/home/tom/work/reviews-php",
        script="""
        U: users edit their profile, get redirected, and see the old name. Refresh a second later and it's correct
        A: Writes go to the primary, and the profile page reads from a replica. Replication lag (Seconds_Behind_Source 1-2 s at peak) means the read right after the write returns stale data.
        $ mysql -h replica-1 -e "SHOW REPLICA STATUS\\G" | grep Seconds_Behind_Source
        >         Seconds_Behind_Source: 2
        ~ src/Db/Router.php
        > +    // Read-your-writes: a session that wrote in the last 5 seconds reads from the primary.
        > +    if ($session->get('last_write_at', 0) > time() - 5) {
        > +        return $this->primary;
        > +    }
        A: Sticky primary reads for 5 s after a write, per session. Laravel has the same idea as the `sticky` option.
        """,
        exact="Seconds_Behind_Source",
        paraphrase="after saving account changes people briefly view outdated values since the mirror server trails the main one",
        mixed="replica: after saving account changes people briefly view outdated values",
    ),
    Incident(
        key="sqlite-double-quoted-string",
        cwd="/home/lee/projects/tagger",
        script="""
        U: weird: SELECT * FROM photos WHERE tag = "beach" works in the sqlite3 shell, but after upgrading the app to SQLite 3.41 it fails with no such column: beach
        A: In SQL, double quotes delimit identifiers and single quotes delimit strings. SQLite used to accept "beach" as a string when no such column exists (a legacy misfeature); builds with SQLITE_DQS=0 now reject it.
        $ grep -rn '= \\"' tagger/queries.py | head -3
        > tagger/queries.py:12:    "SELECT * FROM photos WHERE tag = \\"" + tag + "\\""
        ~ tagger/queries.py
        > -    "SELECT * FROM photos WHERE tag = \\"" + tag + "\\""
        > +    "SELECT * FROM photos WHERE tag = ?", (tag,)
        A: Using a parameter removes the quoting issue entirely (and the injection risk that came with it).
        """,
        exact="no such column: beach",
        paraphrase="after an embedded engine bump a filter by keyword broke since text was wrapped in quotation marks meant for names",
        mixed="SQLITE_DQS: filter by keyword broke since text was wrapped in quotation marks meant for names",
    ),
)
