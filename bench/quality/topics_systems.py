"""Incidents from systems work: Rust, Go, C and C++, the JVM, mobile, concurrency and memory."""

# Session scripts are transcript text: wrapping their lines would change the messages.
# ruff: noqa: E501

from __future__ import annotations

from bench.quality.incident import Incident

INCIDENTS: tuple[Incident, ...] = (
    Incident(
        key="rs-borrow-mut-immut",
        cwd="/home/kai/code/tilecache",
        script="""
        U: cargo build fails in the cache lookup: error[E0502]: cannot borrow `*self` as mutable because it is also borrowed as immutable
        @ src/cache.rs
        > pub fn get_or_load(&mut self, key: TileKey) -> &Tile {
        >     if let Some(t) = self.tiles.get(&key) {
        >         return t;
        >     }
        >     let tile = self.load(key);
        >     self.tiles.insert(key, tile);
        >     &self.tiles[&key]
        > }
        A: This is the known NLL limitation (problem case #3): returning `t` from the `if let` extends the shared borrow of `self.tiles` over the whole function, so `self.load` (which needs `&mut self`) conflicts. The entry API does the lookup and insertion with one borrow.
        ~ src/cache.rs
        > -    if let Some(t) = self.tiles.get(&key) {
        > -        return t;
        > -    }
        > -    let tile = self.load(key);
        > -    self.tiles.insert(key, tile);
        > -    &self.tiles[&key]
        > +    let loader = &self.loader;
        > +    self.tiles.entry(key).or_insert_with(|| loader.load(key))
        $ cargo build
        >    Compiling tilecache v0.4.0 (/home/kai/code/tilecache)
        >     Finished `dev` profile [unoptimized + debuginfo] target(s) in 3.41s
        A: Moving `load` onto a separate `loader` field lets the closure borrow it while `tiles` is borrowed mutably.
        """,
        exact="E0502 cannot borrow `*self` as mutable because it is also borrowed as immutable",
        paraphrase="memoizing accessor rejected by the ownership checker: fetch-then-populate pattern",
        mixed="E0502 memoizing accessor rejected by the ownership checker",
        distractor="""
        U: error[E0499]: cannot borrow `self.tiles` as mutable more than once at a time in the eviction loop
        A: The loop holds `iter_mut()` over tiles while calling `self.tiles.remove`. Collect the keys to evict first, then remove them in a second pass.
        A: Different error code from the get_or_load case: two mutable borrows, not shared plus mutable.
        """,
    ),
    Incident(
        key="rs-lifetime-struct-str",
        cwd="/home/kai/code/logparse",
        script="""
        U: I want the parser to keep slices of the input instead of Strings but I get error[E0106]: missing lifetime specifier on `struct Record { host: &str, path: &str }`
        A: A struct that holds references must name the lifetime of the data it borrows, so the compiler can check that the input outlives every Record.
        ~ src/record.rs
        > -pub struct Record {
        > -    pub host: &str,
        > -    pub path: &str,
        > +pub struct Record<'a> {
        > +    pub host: &'a str,
        > +    pub path: &'a str,
        $ cargo build 2>&1 | grep -m2 error
        > error[E0597]: `line` does not live long enough
        > error: could not compile `logparse` (bin "logparse") due to 1 previous error
        A: Now the real problem shows: main reads each line into a `String` inside the loop and pushes `Record<'_>` borrowing it into a Vec that lives longer than the line. Either parse and aggregate inside the loop, or read the whole file into one buffer first. I went with `let data = fs::read_to_string(path)?` and `data.lines()`, and allocations dropped from 1.9M to 12.
        """,
        exact="E0106 missing lifetime specifier struct Record",
        paraphrase="zero-copy tokenizer storing views into its text was rejected: views outlasting their backing storage",
        mixed="E0597 zero-copy tokenizer storing views into its text, views outlasting their backing storage",
    ),
    Incident(
        key="rs-mutexguard-not-send",
        cwd="/home/kai/code/ingest-rs",
        script="""
        U: tokio::spawn refuses my task: error: future cannot be sent between threads safely ... the trait `Send` is not implemented for `std::sync::MutexGuard<'_, HashMap<String, u64>>`
        @ src/stats.rs
        > async fn record(state: Arc<Mutex<HashMap<String, u64>>>, key: String) {
        >     let mut map = state.lock().unwrap();
        >     *map.entry(key).or_default() += 1;
        >     flush_if_needed(&map).await;
        > }
        A: The std MutexGuard is alive across `.await`, and a std guard must be released on the thread that took it, so the future is not Send and tokio's multi-threaded runtime cannot move it.
        ~ src/stats.rs
        > -    let mut map = state.lock().unwrap();
        > -    *map.entry(key).or_default() += 1;
        > -    flush_if_needed(&map).await;
        > +    let snapshot = {
        > +        let mut map = state.lock().unwrap();
        > +        *map.entry(key).or_default() += 1;
        > +        needs_flush(&map).then(|| map.clone())
        > +    };
        > +    if let Some(s) = snapshot { flush(s).await; }
        A: Guard dropped before the await. tokio::sync::Mutex would also compile, but holding any lock during I/O is what we want to avoid anyway.
        """,
        exact="future cannot be sent between threads safely MutexGuard",
        paraphrase="parallel executor rejects our coroutine since a standard library exclusion handle persists over a yield",
        mixed="MutexGuard persists over a yield so the parallel executor rejects our coroutine",
    ),
    Incident(
        key="rs-tokio-runtime-within-runtime",
        cwd="/home/kai/code/ingest-rs",
        script="""
        U: panic at startup: Cannot start a runtime from within a runtime. This happens because a function (like `block_on`) attempted to block the current thread while the thread is being used to drive asynchronous tasks.
        $ RUST_BACKTRACE=1 cargo run 2>&1 | grep -m3 "at src"
        >    at src/config.rs:42:9
        >    at src/main.rs:18:5
        @ src/config.rs
        > pub fn load_remote() -> Config {
        >     let rt = tokio::runtime::Runtime::new().unwrap();
        >     rt.block_on(fetch_config())
        > }
        A: `load_remote` builds a second runtime and blocks on it, but it is called from `#[tokio::main] async fn main`, already on a runtime worker. Make it async and await it.
        ~ src/config.rs
        > -pub fn load_remote() -> Config {
        > -    let rt = tokio::runtime::Runtime::new().unwrap();
        > -    rt.block_on(fetch_config())
        > +pub async fn load_remote() -> Config {
        > +    fetch_config().await
        """,
        exact="Cannot start a runtime from within a runtime",
        paraphrase="program aborts at launch: nested executor creation within an active scheduler",
        mixed="block_on: program aborts at launch, nested executor creation within an active scheduler",
    ),
    Incident(
        key="rs-serde-missing-field",
        cwd="/home/kai/code/tilecache",
        script="""
        U: after the API change old cached manifests fail to load: Error("missing field `created_at`", line: 1, column: 212)
        @ src/manifest.rs
        > #[derive(Deserialize)]
        > pub struct Manifest {
        >     pub version: u32,
        >     pub tiles: Vec<TileRef>,
        >     pub created_at: DateTime<Utc>,
        > }
        A: The files on disk predate the `created_at` field. serde requires every non-Option field unless told otherwise.
        ~ src/manifest.rs
        > -    pub created_at: DateTime<Utc>,
        > +    #[serde(default = "epoch")]
        > +    pub created_at: DateTime<Utc>,
        A: Old manifests get 1970-01-01, which the cache treats as "stale, refresh on next use". I added a test that loads a v1 manifest fixture.
        $ cargo test manifest
        > test manifest::loads_v1_without_created_at ... ok
        """,
        exact="missing field `created_at`",
        paraphrase="previously saved JSON documents refuse parsing after introducing a mandatory birth stamp",
        mixed="created_at absent from previously saved JSON documents, parsing refused",
        distractor="""
        U: serde fails with unknown field `createdAt`, expected one of `version`, `tiles`, `created_at`
        A: The new API sends camelCase and the struct has `#[serde(deny_unknown_fields)]`. Add `#[serde(rename_all = "camelCase")]` to match the wire format.
        A: The field exists, it just had a different spelling; nothing was absent.
        """,
    ),
    Incident(
        key="rs-openssl-sys-cross",
        cwd="/home/kai/code/ingest-rs",
        script="""
        U: the alpine docker build fails compiling openssl-sys: Could not find directory of OpenSSL installation, and this `-sys` crate cannot proceed without this knowledge.
        $ cargo tree -i openssl-sys
        > openssl-sys v0.9.103
        > └── native-tls v0.2.12
        >     └── reqwest v0.12.7
        >         └── ingest-rs v0.3.0
        A: reqwest's default TLS backend is native-tls, which links the system OpenSSL; the musl builder image has no OpenSSL headers. Switching reqwest to rustls avoids the C dependency entirely, which also makes the static musl binary simpler.
        ~ Cargo.toml
        > -reqwest = { version = "0.12", features = ["json"] }
        > +reqwest = { version = "0.12", default-features = false, features = ["json", "rustls-tls"] }
        $ docker build -t ingest-rs . 2>&1 | tail -1
        > => => naming to docker.io/library/ingest-rs
        """,
        exact="Could not find directory of OpenSSL installation",
        paraphrase="minimal Linux container breaks for lack of libssl development packages",
        mixed="openssl-sys: minimal Linux container breaks for lack of libssl development packages",
    ),
    Incident(
        key="rs-subtract-overflow",
        cwd="/home/kai/code/logparse",
        script="""
        U: debug build panics on an empty file: thread 'main' panicked at src/window.rs:27:23: attempt to subtract with overflow
        @ src/window.rs
        > let last = lines.len() - 1;
        > for i in 0..=last {
        A: `lines.len()` is a usize; for an empty file it is 0 and `0 - 1` overflows. Debug builds panic, release builds would wrap to 18446744073709551615 and index out of bounds.
        ~ src/window.rs
        > -let last = lines.len() - 1;
        > -for i in 0..=last {
        > +for i in 0..lines.len() {
        A: And `lines.len().saturating_sub(window)` for the tail computation two lines down, which had the same problem with files shorter than the window.
        """,
        exact="attempt to subtract with overflow",
        paraphrase="blank log crashes the parser tool since zero minus one underflows an unsigned length",
        mixed="saturating_sub: blank log crashes the parser tool since zero minus one underflows",
    ),
    Incident(
        key="go-all-goroutines-asleep",
        cwd="/home/ravi/go/src/github.com/acme/fanout",
        script="""
        U: fatal error: all goroutines are asleep - deadlock! when I run the fanout example
        @ main.go
        > results := make(chan Result)
        > for _, u := range urls {
        >     results <- fetch(u)
        > }
        > close(results)
        > for r := range results {
        A: `results` is unbuffered and the send happens on the main goroutine before anyone receives, so main blocks on the first send and no other goroutine exists to wake it.
        ~ main.go
        > -    results <- fetch(u)
        > +    wg.Add(1)
        > +    go func(u string) { defer wg.Done(); results <- fetch(u) }(u)
        >  }
        > -close(results)
        > +go func() { wg.Wait(); close(results) }()
        $ go run . -n 20
        > fetched 20 urls in 412ms
        """,
        exact="fatal error: all goroutines are asleep - deadlock!",
        paraphrase="runtime kills our concurrent downloader at once: entry routine stuck pushing values nobody consumes",
        mixed="unbuffered: runtime kills our concurrent downloader at once, values nobody consumes",
        distractor="""
        U: the fanout tool never exits after printing all results, no error
        A: The consumer ranges over `results` but nobody closes the channel, so the loop waits forever; because a ticker goroutine is still alive the runtime does not report all goroutines asleep.
        A: Close results after wg.Wait() in its own goroutine.
        """,
    ),
    Incident(
        key="go-goroutine-leak-context",
        cwd="/home/ravi/go/src/github.com/acme/search-api",
        script="""
        U: memory of search-api climbs all day, /debug/pprof/goroutine shows 180k goroutines
        $ go tool pprof -top http://localhost:6060/debug/pprof/goroutine | head -4
        > Showing nodes accounting for 181203, 100% of 181203 total
        >      181190 99.99%  runtime.gopark
        >           0     0%  main.queryShard.func1
        A: Almost all are parked in queryShard.func1. Let me read it.
        @ shard.go
        > func queryShard(ctx context.Context, s Shard, q Query) ([]Hit, error) {
        >     ch := make(chan result)
        >     go func() { ch <- s.Search(q) }()
        >     select {
        >     case r := <-ch:
        >         return r.hits, r.err
        >     case <-ctx.Done():
        >         return nil, ctx.Err()
        >     }
        > }
        A: When the request context is cancelled first, nobody ever reads `ch`, and the goroutine blocks forever on the send. Buffer the channel so the send always completes, and pass ctx into Search so it stops early.
        ~ shard.go
        > -    ch := make(chan result)
        > -    go func() { ch <- s.Search(q) }()
        > +    ch := make(chan result, 1)
        > +    go func() { ch <- s.Search(ctx, q) }()
        """,
        exact="queryShard.func1 runtime.gopark",
        paraphrase="lookup backend piles up thousands of stuck green threads after clients hang up",
        mixed="queryShard piles up thousands of stuck green threads after clients hang up",
    ),
    Incident(
        key="go-concurrent-map-writes",
        cwd="/home/ravi/go/src/github.com/acme/search-api",
        script="""
        U: search-api crashed in prod with fatal error: concurrent map writes
        $ grep -n -A3 "concurrent map writes" crash.log | head -6
        > fatal error: concurrent map writes
        > goroutine 8812 [running]:
        > main.(*Cache).Put(...)
        >     /app/cache.go:31
        A: Cache.Put writes to a plain Go map from many HTTP handler goroutines. Maps are not safe for concurrent writes and the runtime aborts the process (it cannot be recovered).
        ~ cache.go
        >  type Cache struct {
        > +    mu    sync.RWMutex
        >      items map[string]entry
        >  }
        A: Put takes `mu.Lock()`, Get takes `mu.RLock()`. I ran the handler tests with `go test -race ./...`, which passes now and would have caught this earlier; I added -race to CI.
        """,
        exact="fatal error: concurrent map writes",
        paraphrase="golang service died live since parallel web routines mutate one unsynchronized hashmap",
        mixed="RWMutex: golang service died live since parallel web routines mutate one hashmap",
    ),
    Incident(
        key="go-loopvar-capture",
        cwd="/home/ravi/go/src/github.com/acme/fanout",
        script="""
        U: all my goroutines print the same id, the last one, "worker 9" ten times
        @ spawn.go
        > for i := 0; i < 10; i++ {
        >     go func() {
        >         log.Printf("worker %d", i)
        >     }()
        > }
        A: Before Go 1.22 the loop has a single `i` variable shared by all iterations; the closures read it when they run, usually after the loop finished. go.mod says `go 1.21`.
        $ grep '^go ' go.mod
        > go 1.21
        A: Either bump the go directive to 1.22 (per-iteration loop variables) or pass i as an argument. I did both, since we build with 1.23 anyway.
        ~ spawn.go
        > -    go func() {
        > -        log.Printf("worker %d", i)
        > -    }()
        > +    go func(id int) {
        > +        log.Printf("worker %d", id)
        > +    }(i)
        """,
        exact='log.Printf("worker %d", i)',
        paraphrase="each background task emits identical final index since lambdas capture the counter",
        mixed="closures: each background task emits identical final index",
        distractor="""
        U: the worker pool processes only 9 of the 10 jobs, the last one never runs
        @ pool.go
        > for i := 0; i < len(jobs)-1; i++ {
        >     queue <- jobs[i]
        > }
        A: An off-by-one in the loop bound: `len(jobs)-1` skips the last job. Use `for _, j := range jobs`. The goroutines themselves capture their arguments correctly here.
        """,
    ),
    Incident(
        key="go-nil-interface-error",
        cwd="/home/ravi/go/src/github.com/acme/payments",
        script="""
        U: validate() returns nil but `if err != nil` is still true and we log "validation failed: <nil>"
        @ validate.go
        > func validate(p Payment) error {
        >     var verr *ValidationError
        >     if p.Amount <= 0 {
        >         verr = &ValidationError{Field: "amount"}
        >     }
        >     return verr
        > }
        A: The function returns an `error` interface holding a typed nil `*ValidationError`. An interface is nil only when both its type and value are nil; here the type is set, so `err != nil`.
        ~ validate.go
        > -    var verr *ValidationError
        >      if p.Amount <= 0 {
        > -        verr = &ValidationError{Field: "amount"}
        > +        return &ValidationError{Field: "amount"}
        >      }
        > -    return verr
        > +    return nil
        A: staticcheck has a check for this (SA4023); I added it to the linters.
        """,
        exact='validation failed: <nil>',
        paraphrase="guard signals failure on correct input because an empty concrete pointer boxed into an abstraction counts as present",
        mixed="SA4023: guard signals failure on correct input, empty concrete pointer boxed into an abstraction",
    ),
    Incident(
        key="go-inconsistent-vendoring",
        cwd="/home/ravi/go/src/github.com/acme/payments",
        script="""
        U: go build fails after I bumped stripe-go: go: inconsistent vendoring in /home/ravi/go/src/github.com/acme/payments
        $ go build ./... 2>&1 | head -4
        > go: inconsistent vendoring in /home/ravi/go/src/github.com/acme/payments:
        > 	github.com/stripe/stripe-go/v79@v79.4.0: is explicitly required in go.mod, but vendor/modules.txt indicates github.com/stripe/stripe-go/v79@v79.1.0
        > 	To ignore the vendor directory, use -mod=readonly or -mod=mod.
        > 	To sync the vendor directory, run:
        A: The repo commits a vendor/ directory, and go.mod was edited without re-vendoring.
        $ go mod tidy && go mod vendor && git status --short | head -3
        >  M go.mod
        >  M go.sum
        >  M vendor/modules.txt
        A: Synced. Remember `go mod vendor` after every dependency change while vendor/ is committed.
        """,
        exact="go: inconsistent vendoring",
        paraphrase="compilation breaks after bumping a billing SDK since checked-in third-party copies lag behind",
        mixed="stripe-go raised: compilation breaks since checked-in third-party copies lag behind",
    ),
    Incident(
        key="go-defer-in-loop-fds",
        cwd="/home/ravi/go/src/github.com/acme/logship",
        script="""
        U: logship fails on big directories with "open /var/log/app/part-48211.log: too many open files"
        @ ship.go
        > for _, name := range names {
        >     f, err := os.Open(name)
        >     if err != nil { return err }
        >     defer f.Close()
        >     if err := upload(f); err != nil { return err }
        > }
        A: `defer` runs at function return, not at the end of each iteration, so every file stays open until all 50k are processed and the process hits the 1024 descriptor limit.
        ~ ship.go
        > -    f, err := os.Open(name)
        > -    if err != nil { return err }
        > -    defer f.Close()
        > -    if err := upload(f); err != nil { return err }
        > +    if err := shipOne(name); err != nil { return err }
        A: shipOne opens, defers the Close and uploads, so each file closes when its call returns.
        """,
        exact="too many open files defer f.Close()",
        paraphrase="forwarder exhausts handles on huge folders since closing is postponed until exit of the enclosing routine",
        mixed="defer: forwarder exhausts handles on huge folders, closing postponed until exit",
        distractor="""
        U: logship gets "too many open files" under load but only in the container
        A: The container's nofile limit is 1024 while the host has 65536, and logship keeps one HTTP connection per destination. Raise `ulimits: nofile: 65536` in the compose file.
        A: The file handling loop itself was correct here.
        """,
    ),
    Incident(
        key="go-json-unexported-fields",
        cwd="/home/ravi/go/src/github.com/acme/payments",
        script="""
        U: json.Unmarshal gives me an empty struct, no error. The payload definitely has "amount" and "currency"
        @ webhook.go
        > type event struct {
        >     amount   int64
        >     currency string
        > }
        A: encoding/json only sees exported (capitalised) fields; lowercase fields are silently ignored during decoding.
        ~ webhook.go
        > -    amount   int64
        > -    currency string
        > +    Amount   int64  `json:"amount"`
        > +    Currency string `json:"currency"`
        A: With `dec.DisallowUnknownFields()` the decoder would have returned an error for the unknown keys and made this visible; I enabled it for webhooks.
        """,
        exact="json.Unmarshal amount currency lowercase fields",
        paraphrase="notification parsing yields zeroed record, no complaint, since members are private",
        mixed="json.Unmarshal notification parsing yields zeroed record, no complaint, since members are private",
    ),
    Incident(
        key="c-heap-use-after-free",
        cwd="/home/nina/src/mqtt-bridge",
        script="""
        U: the bridge segfaults every few hours, core dump points into on_message but the code looks fine
        $ make ASAN=1 && ./mqtt-bridge -c test.conf
        > ==23411==ERROR: AddressSanitizer: heap-use-after-free on address 0x6020000003b0 at pc 0x55f1c2 bp 0x7ffd sp 0x7ffd
        > READ of size 8 at 0x6020000003b0 thread T0
        >     #0 0x55f1c1 in on_message src/bridge.c:88
        > freed by thread T0 here:
        >     #1 0x55e9a0 in topic_unsubscribe src/topics.c:52
        A: ASan shows it directly: topic_unsubscribe frees the subscription while on_message still holds a pointer to it from the iteration over the list; when a message triggers an unsubscribe (the "once" subscriptions) the loop reads freed memory.
        ~ src/bridge.c
        > -    for (sub = t->subs; sub; sub = sub->next) {
        > +    for (sub = t->subs; sub; sub = next) {
        > +        next = sub->next;
        A: Saving `next` before the callback makes removal during iteration safe. ASan run over the 2-hour soak test is clean.
        """,
        exact="AddressSanitizer: heap-use-after-free",
        paraphrase="IoT relay crashes intermittently: handler touches a released allocation while traversing watchers",
        mixed="AddressSanitizer: IoT relay crashes intermittently, handler touches a released allocation",
        distractor="""
        U: the bridge leaks about 1 MB per hour
        $ valgrind --leak-check=full ./mqtt-bridge -c test.conf 2>&1 | grep "definitely lost"
        > ==9120==    definitely lost: 48,120 bytes in 2,005 blocks
        A: topic_subscribe strdup()s the topic name and topic_unsubscribe never frees it. Added free(sub->topic).
        A: A leak, not a use-after-free: nothing crashed.
        """,
    ),
    Incident(
        key="cpp-undefined-vtable",
        cwd="/home/nina/src/render-engine",
        script="""
        U: link error: undefined reference to `vtable for ShadowPass'
        $ grep -n "virtual" src/passes/ShadowPass.h
        > 12:    virtual ~ShadowPass();
        > 13:    virtual void execute(FrameGraph& fg) override;
        > 14:    virtual void resize(int w, int h);
        A: GCC emits the vtable in the translation unit that defines the first non-inline virtual function (the "key function"). `~ShadowPass()` is declared but never defined in ShadowPass.cpp, so no TU emits the vtable.
        ~ src/passes/ShadowPass.cpp
        > +ShadowPass::~ShadowPass() = default;
        $ cmake --build build -j2 2>&1 | tail -1
        > [100%] Built target render-engine
        A: Also checked: ShadowPass.cpp was in the CMake target's sources, which is the other usual cause.
        """,
        exact="undefined reference to `vtable for ShadowPass'",
        paraphrase="C++ final stage fails since polymorphic dispatch tables were not emitted; destructor body absent",
        mixed="ShadowPass: polymorphic dispatch tables were not emitted; destructor body absent",
    ),
    Incident(
        key="c-strncpy-unterminated",
        cwd="/home/nina/src/mqtt-bridge",
        script="""
        U: client ids in our logs sometimes have garbage at the end like "sensor-17\\x7f\\x1b..."
        $ valgrind ./mqtt-bridge -c test.conf 2>&1 | grep -m2 -A2 "Conditional jump"
        > ==8811== Conditional jump or move depends on uninitialised value(s)
        > ==8811==    at 0x4C3A: strlen (vg_replace_strmem.c:494)
        > ==8811==    by 0x10A3F: log_client (src/log.c:40)
        @ src/client.c
        > char id[24];
        > strncpy(id, packet->client_id, sizeof(id));
        A: strncpy does not write a terminating NUL when the source is at least `sizeof(id)` bytes long; client ids of 24+ characters leave `id` unterminated and strlen reads past it.
        ~ src/client.c
        > -strncpy(id, packet->client_id, sizeof(id));
        > +snprintf(id, sizeof(id), "%s", packet->client_id);
        A: snprintf always terminates (and truncates). I grepped for other strncpy uses: two more in src/topics.c, fixed the same way.
        """,
        exact="Conditional jump or move depends on uninitialised value(s)",
        paraphrase="device names printed with random junk appended since a bounded copy omits the final zero",
        mixed="strncpy: device names printed with random junk appended",
    ),
    Incident(
        key="go-data-race-counter",
        cwd="/home/ravi/go/src/github.com/acme/logship",
        script="""
        U: the shipped-lines counter in /metrics is always lower than the real number of lines
        $ go test -race -run TestShipMany ./... 2>&1 | head -6
        > ==================
        > WARNING: DATA RACE
        > Read at 0x00c0000b4010 by goroutine 23:
        >   github.com/acme/logship.(*Shipper).ship()
        >       /home/ravi/go/src/github.com/acme/logship/ship.go:77 +0x64
        > Previous write at 0x00c0000b4010 by goroutine 19:
        A: `s.shipped++` runs in 8 worker goroutines at once; the read-modify-write is not atomic, so concurrent increments get lost.
        ~ ship.go
        > -    shipped int64
        > +    shipped atomic.Int64
        > -    s.shipped++
        > +    s.shipped.Add(1)
        A: atomic.Int64 (Go 1.19+) also keeps the field 64-bit aligned on 32-bit ARM.
        """,
        exact="WARNING: DATA RACE s.shipped++",
        paraphrase="prometheus total undercounts since parallel routines bump one integer unsafely",
        mixed="-race: prometheus total undercounts since parallel routines bump one integer unsafely",
    ),
    Incident(
        key="cpp-emfile-accept-loop",
        cwd="/home/nina/src/edge-proxy",
        script="""
        U: under load the proxy starts spinning at 100% CPU and stops accepting, logs show accept4: Too many open files (EMFILE) thousands of times per second
        $ ls /proc/$(pidof edge-proxy)/fd | wc -l; grep "open files" /proc/$(pidof edge-proxy)/limits
        > 1024
        > Max open files            1024                 4096                 files
        A: Two issues. The soft limit is 1024. And when accept4 fails with EMFILE the pending connection stays in the backlog, so epoll reports the listening socket readable again immediately: a busy loop.
        ~ src/acceptor.cpp
        > +        if (errno == EMFILE || errno == ENFILE) {
        > +            close(reserve_fd_);
        > +            int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        > +            close(c);
        > +            reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
        > +            continue;
        > +        }
        A: The reserve descriptor trick (from libev) lets us accept and immediately close the connection instead of spinning. And the systemd unit now sets LimitNOFILE=65536.
        """,
        exact="accept4: Too many open files (EMFILE)",
        paraphrase="network relay spins at full throttle and refuses clients once it exhausts its handle ceiling",
        mixed="EMFILE: network relay spins at full throttle and refuses clients",
    ),
    Incident(
        key="jvm-gc-overhead-limit",
        cwd="/home/omar/work/settlement-batch",
        script="""
        U: the nightly Spring Batch settlement job died: java.lang.OutOfMemoryError: GC overhead limit exceeded
        $ jcmd $(pgrep -f settlement) GC.class_histogram | head -5
        >  num     #instances         #bytes  class name (module)
        >    1:      41822105     1338307360  com.acme.settle.Transaction
        >    2:      41822106     1003730544  java.math.BigDecimal
        A: 41M Transaction objects are live at once: the reader uses `findAll()` on the JPA repository, so the whole month is loaded into the heap before the writer gets anything.
        ~ src/main/java/com/acme/settle/JobConfig.java
        > -        return new ListItemReader<>(repo.findAll());
        > +        return new JpaPagingItemReaderBuilder<Transaction>()
        > +            .name("txReader").entityManagerFactory(emf)
        > +            .queryString("select t from Transaction t order by t.id").pageSize(5000).build();
        A: Paging with chunk size 5000 keeps the heap under 600 MB for the whole job.
        """,
        exact="java.lang.OutOfMemoryError: GC overhead limit exceeded",
        paraphrase="reconciliation run on the JVM crashes since every record of thirty days is materialized simultaneously",
        mixed="findAll: reconciliation run on the JVM crashes, thirty days materialized simultaneously",
        distractor="""
        U: settlement job fails with java.lang.OutOfMemoryError: Metaspace after a few runs in the same JVM
        A: Each run creates a new Groovy script class for the fee rules and they are never unloaded. Cache the compiled class per rule version.
        A: Heap was fine; this was class metadata, not GC overhead.
        """,
    ),
    Incident(
        key="java-concurrent-modification",
        cwd="/home/omar/work/settlement-batch",
        script="""
        U: removing zero-amount lines throws java.util.ConcurrentModificationException at ArrayList$Itr.checkForComodification
        @ src/main/java/com/acme/settle/Cleaner.java
        > for (Line l : lines) {
        >     if (l.amount().signum() == 0) {
        >         lines.remove(l);
        >     }
        > }
        A: Removing through the list while the enhanced for loop's iterator walks it changes modCount, and the iterator fails fast on the next `next()`.
        ~ src/main/java/com/acme/settle/Cleaner.java
        > -for (Line l : lines) {
        > -    if (l.amount().signum() == 0) {
        > -        lines.remove(l);
        > -    }
        > -}
        > +lines.removeIf(l -> l.amount().signum() == 0);
        """,
        exact="ConcurrentModificationException checkForComodification",
        paraphrase="erasing elements while walking a JVM sequence with for-each crashes",
        mixed="ConcurrentModificationException erasing elements while walking a JVM sequence with for-each",
    ),
    Incident(
        key="android-runblocking-anr",
        cwd="/home/omar/work/courier-android",
        script="""
        U: Play Console shows ANRs "Input dispatching timed out" on the delivery list screen
        @ app/src/main/java/com/acme/courier/ui/DeliveryListFragment.kt
        > override fun onResume() {
        >     super.onResume()
        >     val deliveries = runBlocking { repo.refreshDeliveries() }
        >     adapter.submitList(deliveries)
        > }
        A: `runBlocking` on the main thread blocks the UI thread for the whole network refresh; after 5 s without processing input Android raises an ANR.
        ~ app/src/main/java/com/acme/courier/ui/DeliveryListFragment.kt
        > -    val deliveries = runBlocking { repo.refreshDeliveries() }
        > -    adapter.submitList(deliveries)
        > +    viewLifecycleOwner.lifecycleScope.launch {
        > +        adapter.submitList(repo.refreshDeliveries())
        > +    }
        A: refreshDeliveries already switches to Dispatchers.IO internally. StrictMode in debug builds now flags network on the main thread.
        """,
        exact="Input dispatching timed out runBlocking",
        paraphrase="mobile parcels page unresponsive since fetching stalls the rendering looper",
        mixed="runBlocking: mobile parcels page unresponsive since fetching stalls the rendering looper",
    ),
    Incident(
        key="swift-iboutlet-nil",
        cwd="/Users/omar/dev/courier-ios",
        script="""
        U: app crashes when opening the signature screen: Thread 1: Fatal error: Unexpectedly found nil while implicitly unwrapping an Optional value, on signatureView.layer.borderWidth
        A: `signatureView` is an `@IBOutlet weak var signatureView: UIView!`. Nil there almost always means the storyboard connection is missing or the controller is created in code without the storyboard.
        $ grep -n "signatureView" Courier/Base.lproj/Main.storyboard | head -3
        >
        A: No outlet connection in the storyboard: the view was recreated during the redesign and the old connection was dropped. I reconnected it in Interface Builder and added an `assert(signatureView != nil)` in viewDidLoad for debug builds.
        $ git diff --stat
        >  Courier/Base.lproj/Main.storyboard | 3 +++
        """,
        exact="Unexpectedly found nil while implicitly unwrapping an Optional value",
        paraphrase="iPhone client dies showing the autograph page since a visual designer wiring vanished",
        mixed="signatureView: iPhone client dies showing the autograph page, visual designer wiring vanished",
    ),
    Incident(
        key="rs-serde-derive-feature",
        cwd="/home/kai/code/metrics-agent",
        script="""
        U: error[E0277]: the trait bound `Sample: Serialize` is not satisfied when calling serde_json::to_vec(&sample), but I have #[derive(Serialize)] on Sample!
        $ grep -n "Serialize" src/sample.rs; grep -n "^serde\\|^rkyv" Cargo.toml
        > 3:use rkyv::{Archive, Serialize};
        > 9:#[derive(Archive, Serialize, Debug)]
        > 14:serde = "1"
        > 15:rkyv = { version = "0.8", features = ["bytecheck"] }
        A: The `Serialize` in scope is rkyv's, imported last week for the zero-copy spool format, so `#[derive(Serialize)]` implements `rkyv::Serialize`. serde_json needs `serde::Serialize`, which Sample does not implement. serde also lacks its `derive` feature, so the serde derive macro was never available.
        ~ Cargo.toml
        > -serde = "1"
        > +serde = { version = "1", features = ["derive"] }
        ~ src/sample.rs
        > -#[derive(Archive, Serialize, Debug)]
        > +#[derive(Archive, rkyv::Serialize, serde::Serialize, Debug)]
        $ cargo build 2>&1 | tail -1
        >     Finished `dev` profile [unoptimized + debuginfo] target(s) in 7.02s
        A: Both derives are spelled with their crate path now, so the two same-named traits cannot be confused again.
        """,
        exact="the trait bound `Sample: Serialize` is not satisfied",
        paraphrase="automatic encoding had no effect because a homonymous capability from a binary snapshot library shadowed it",
        mixed="#[derive(Serialize)] had no effect; a homonymous capability from a binary snapshot library shadowed it",
    ),
    Incident(
        key="rs-msrv-rustc-too-old",
        cwd="/home/kai/code/metrics-agent",
        script="""
        U: the Debian package build fails: error: package `clap_lex v0.7.2` cannot be built because it requires rustc 1.74 or newer, while the currently active rustc version is 1.63.0
        A: Debian 12's packaged rustc is 1.63; `cargo update` pulled clap 4.5, whose MSRV is 1.74.
        $ cargo +1.63.0 update -p clap --precise 4.0.32 2>&1 | tail -2
        >     Updating clap v4.5.17 -> v4.0.32
        >     Updating clap_lex v0.7.2 -> v0.3.3
        A: Pinned clap 4.0.32 in Cargo.lock and declared `rust-version = "1.63"` in Cargo.toml, so Cargo's MSRV-aware resolver (resolver v3 / `incompatible-rust-versions = "fallback"`) keeps picking compatible versions.
        """,
        exact="requires rustc 1.74 or newer, while the currently active rustc version is 1.63.0",
        paraphrase="distro release job broke because its bundled compiler is older than a freshly bumped CLI dependency demands",
        mixed="MSRV mismatch: distro toolchain older than what the argument parser demands",
    ),
    Incident(
        key="cpp-static-init-order",
        cwd="/home/nina/src/render-engine",
        script="""
        U: the engine crashes before main() only in the release build, the backtrace shows PassRegistry::add
        $ gdb -batch -ex run -ex bt ./build-release/render-engine 2>&1 | grep -m4 "#"
        > #0  std::_Hashtable<...>::_M_insert_unique_node
        > #1  PassRegistry::add (name=...) at src/PassRegistry.cpp:18
        > #2  __static_initialization_and_destruction_0 () at src/passes/BloomPass.cpp:9
        A: BloomPass.cpp registers itself via a global `static bool registered = PassRegistry::add(...)`. PassRegistry keeps its map as a global in another translation unit, and the order of dynamic initialization across TUs is unspecified: in the release link order the map is not constructed yet (static initialization order fiasco).
        ~ src/PassRegistry.cpp
        > -static std::unordered_map<std::string, Factory> g_passes;
        > +static std::unordered_map<std::string, Factory>& passes() {
        > +    static std::unordered_map<std::string, Factory> m;  // constructed on first use
        > +    return m;
        > +}
        A: Function-local statics are initialized on first call (and thread-safe since C++11).
        """,
        exact="__static_initialization_and_destruction_0 PassRegistry::add",
        paraphrase="optimized executable segfaults before entry since a plugin catalogue isn't ready when another source enrolls into it",
        mixed="PassRegistry: optimized executable segfaults before entry",
    ),
    Incident(
        key="go-http-client-no-timeout",
        cwd="/home/ravi/go/src/github.com/acme/search-api",
        script="""
        U: some /search requests never return, the goroutine dump shows them stuck in net/http.(*persistConn).roundTrip for hours
        @ upstream.go
        > var client = &http.Client{}
        > func callRanker(req *RankRequest) (*RankResponse, error) {
        >     resp, err := client.Post(rankerURL, "application/json", encode(req))
        A: `http.Client{}` has no Timeout; when the ranker accepts the connection but never answers (it does that under GC pauses), the call waits forever.
        ~ upstream.go
        > -var client = &http.Client{}
        > +var client = &http.Client{Timeout: 2 * time.Second}
        A: And callRanker now takes the request context via NewRequestWithContext so a client disconnect also cancels it. Falling back to unranked results on timeout keeps /search answering.
        """,
        exact="persistConn roundTrip http.Client{}",
        paraphrase="certain queries hang indefinitely when the scoring microservice stalls; outbound traffic lacks a deadline",
        mixed="callRanker: certain queries hang indefinitely, outbound traffic lacks a deadline",
        distractor="""
        U: search-api makes a new TCP connection for every ranker call, lots of TIME_WAIT
        A: The response body is not fully read before Close, so the connection cannot return to the pool. Drain with io.Copy(io.Discard, resp.Body) before closing, and set MaxIdleConnsPerHost to 32.
        A: The calls did return; it was connection reuse, not a missing timeout.
        """,
    ),
    Incident(
        key="rs-rwlock-self-deadlock",
        cwd="/home/kai/code/metrics-agent",
        script="""
        U: the agent hangs forever on the first config reload, no CPU usage
        @ src/registry.rs
        > let guard = self.sinks.read();
        > for sink in guard.iter() {
        >     if sink.expired() {
        >         self.sinks.write().retain(|s| !s.expired());
        >     }
        > }
        A: The same thread holds a read lock on `sinks` and then asks for the write lock: parking_lot's RwLock is not reentrant, so `write()` waits for the read guard that this very thread holds. Self-deadlock.
        ~ src/registry.rs
        > -let guard = self.sinks.read();
        > -for sink in guard.iter() {
        > -    if sink.expired() {
        > -        self.sinks.write().retain(|s| !s.expired());
        > -    }
        > -}
        > +let any_expired = self.sinks.read().iter().any(|s| s.expired());
        > +if any_expired {
        > +    self.sinks.write().retain(|s| !s.expired());
        > +}
        A: The read guard is a temporary now and is dropped before the write. parking_lot's `deadlock_detection` feature in debug builds would have printed both stacks.
        """,
        exact="self.sinks.write().retain",
        paraphrase="daemon freezes idle upon refreshing settings: shared access held while requesting exclusive access",
        mixed="RwLock: daemon freezes idle upon refreshing settings",
    ),
    Incident(
        key="wasm-unreachable-panic",
        cwd="/home/kai/code/geo-wasm",
        script="""
        U: in the browser the geometry module dies with RuntimeError: unreachable executed, no useful message
        A: A Rust panic inside wasm32-unknown-unknown compiles to the `unreachable` instruction; without a panic hook the message is lost.
        ~ src/lib.rs
        > +#[wasm_bindgen(start)]
        > +pub fn init() {
        > +    console_error_panic_hook::set_once();
        > +}
        $ wasm-pack build --target web --dev && npx serve pkg-demo
        > panicked at src/polygon.rs:61:38: called `Option::unwrap()` on a `None` value
        A: Now we see it: `simplify` unwraps the first ring of a polygon and the test GeoJSON has an empty MultiPolygon member. I return an empty result for empty rings.
        """,
        exact="RuntimeError: unreachable executed",
        paraphrase="WebAssembly bundle aborts mysteriously in Chrome until crash text gets forwarded to devtools",
        mixed="wasm-pack bundle aborts mysteriously in Chrome until crash text gets forwarded to devtools",
    ),
)
