"""Incidents from JavaScript and TypeScript work: Node, React, Next.js, bundlers, test runners."""

# Session scripts are transcript text: wrapping their lines would change the messages.
# ruff: noqa: E501

from __future__ import annotations

from bench.quality.incident import Incident

INCIDENTS: tuple[Incident, ...] = (
    Incident(
        key="js-econnreset-keepalive",
        cwd="/home/ana/src/profile-gateway",
        script="""
        U: about 2% of requests fail with `Error: read ECONNRESET` in fetchUserProfile, always after the service has been idle for a bit
        @ src/clients/users.ts
        > const agent = new http.Agent({ keepAlive: true, maxSockets: 50 });
        > export async function fetchUserProfile(id: string) {
        >   const res = await fetch(`${USERS_URL}/users/${id}`, { agent });
        >   return res.json();
        > }
        A: The users service runs Node with the default `server.keepAliveTimeout` of 5 seconds. Our agent keeps idle sockets around longer, so after a quiet period we write a request onto a socket the server just closed and get ECONNRESET.
        $ curl -sI http://users.internal/healthz | grep -i keep-alive
        > Keep-Alive: timeout=5
        A: Two changes: our agent drops idle sockets after 4 s (`freeSocketTimeout` via agentkeepalive), and fetchUserProfile retries once on ECONNRESET because the request is an idempotent GET.
        ~ src/clients/users.ts
        > -const agent = new http.Agent({ keepAlive: true, maxSockets: 50 });
        > +const agent = new HttpAgent({ keepAlive: true, maxSockets: 50, freeSocketTimeout: 4000 });
        U: zero resets over the weekend
        """,
        exact="ECONNRESET in fetchUserProfile",
        paraphrase="sporadic peer hangups between microservices after lulls; pooled links outlive what the remote tolerates",
        mixed="ECONNRESET: sporadic peer hangups between microservices after lulls",
        distractor="""
        U: fetchUserProfile takes 30 seconds sometimes and then fails with ETIMEDOUT
        A: DNS: the container resolves users.internal through a resolver that drops AAAA queries, and Node tries IPv6 first. Setting `--dns-result-order=ipv4first` removes the wait.
        $ node --dns-result-order=ipv4first scripts/probe-users.js
        > 200 in 41ms
        A: No keep-alive or connection reset problem involved.
        """,
    ),
    Incident(
        key="js-react-max-update-depth",
        cwd="/home/ana/src/dashboard-web",
        script="""
        U: the Filters page freezes and the console says "Maximum update depth exceeded. This can happen when a component calls setState inside useEffect"
        @ src/pages/Filters.tsx
        > const options = { status: selected, sort: "date" };
        > useEffect(() => {
        >   setQuery(buildQuery(options));
        > }, [options]);
        A: `options` is a new object literal on every render, so the effect's dependency always changes, the effect calls setQuery, which renders again, which creates a new `options`... an infinite render loop.
        ~ src/pages/Filters.tsx
        > -const options = { status: selected, sort: "date" };
        > -useEffect(() => {
        > -  setQuery(buildQuery(options));
        > -}, [options]);
        > +useEffect(() => {
        > +  setQuery(buildQuery({ status: selected, sort: "date" }));
        > +}, [selected]);
        A: Depending on the primitive `selected` instead of the object breaks the loop. If the object is needed elsewhere, wrap it in useMemo keyed on `selected`.
        """,
        exact="Maximum update depth exceeded",
        paraphrase="browser tab locks up because a hook keeps re-triggering itself from a freshly built dictionary each paint",
        mixed="useEffect keeps re-triggering itself and the browser tab locks up",
        distractor="""
        U: the Filters page renders twice on load in development, is that a bug?
        A: No: React 18 StrictMode mounts, unmounts and remounts components in development to surface effects without cleanup. The double useEffect call disappears in production builds.
        A: Nothing loops here, there is no Maximum update depth error, it is StrictMode by design.
        """,
    ),
    Incident(
        key="js-next-hydration-mismatch",
        cwd="/home/ana/src/storefront",
        script="""
        U: Next.js shows "Error: Text content does not match server-rendered HTML" on the product page, the diff is in the price footer
        @ app/product/[slug]/PriceFooter.tsx
        > export function PriceFooter({ price }: Props) {
        >   return <p>{price.toLocaleString()} · updated {new Date().toLocaleTimeString()}</p>;
        > }
        A: Two values differ between the server render and the client's first render: `toLocaleString()` uses the server's locale (en-US, "1,299") versus the browser's (de-DE, "1.299"), and `new Date()` is a different instant on each side. React then refuses to hydrate the text node.
        ~ app/product/[slug]/PriceFooter.tsx
        > -  return <p>{price.toLocaleString()} · updated {new Date().toLocaleTimeString()}</p>;
        > +  return <p>{formatPrice(price, locale)} · updated <ClientTime /></p>;
        A: formatPrice takes the locale from the request (same on both sides), and ClientTime renders the time only after mount with useEffect. The warning is gone.
        """,
        exact="Text content does not match server-rendered HTML",
        paraphrase="SSR markup disagreed with initial paint in visitors' tabs owing to regional numeric style and clock",
        mixed="PriceFooter SSR markup disagreed with initial paint owing to regional numeric style",
    ),
    Incident(
        key="js-jest-esm-import",
        cwd="/home/tom/work/checkout-ui",
        script="""
        U: jest fails after adding nanoid: SyntaxError: Cannot use import statement outside a module, pointing into node_modules/nanoid/index.js
        A: nanoid 5 ships only ES modules. Jest (CommonJS mode, babel-jest) does not transform node_modules by default, so it tries to run the raw `import` syntax.
        $ cat node_modules/nanoid/package.json | grep '"type"'
        >   "type": "module",
        A: Tell babel-jest to transform nanoid by excluding it from `transformIgnorePatterns`.
        ~ jest.config.js
        > -  transformIgnorePatterns: ["/node_modules/"],
        > +  transformIgnorePatterns: ["/node_modules/(?!(nanoid)/)"],
        $ npx jest src/cart
        > Tests:       42 passed, 42 total
        A: The alternative is nanoid@3, which still ships CommonJS, if you prefer not to transform dependencies.
        """,
        exact="Cannot use import statement outside a module",
        paraphrase="unit specs crash parsing a freshly added id-generator library that is published only in ESM",
        mixed="transformIgnorePatterns had to let a freshly added id-generator through",
        distractor="""
        U: jest says "ReferenceError: document is not defined" in the cart tests after upgrading to Jest 29
        A: Jest 28+ no longer ships jsdom by default; the testEnvironment is node. Install jest-environment-jsdom and set `testEnvironment: "jsdom"` in jest.config.js.
        A: This is about the test environment, not about ES modules or transformIgnorePatterns.
        """,
    ),
    Incident(
        key="ts-process-env-undefined",
        cwd="/home/tom/work/checkout-ui",
        script="""
        U: tsc error TS2322: Type 'string | undefined' is not assignable to type 'string'. at `const key: string = process.env.STRIPE_PUBLIC_KEY`
        A: Every property of `process.env` is typed `string | undefined`, because the variable may not be set. Asserting with `!` would just move the crash to runtime. Better to validate once at startup.
        ~ src/env.ts
        > +function required(name: string): string {
        > +  const v = process.env[name];
        > +  if (!v) throw new Error(`missing environment variable ${name}`);
        > +  return v;
        > +}
        > +export const STRIPE_PUBLIC_KEY = required("STRIPE_PUBLIC_KEY");
        $ npx tsc --noEmit
        >
        A: Clean. Other modules import STRIPE_PUBLIC_KEY from src/env.ts, so a missing variable fails at boot with a readable message.
        """,
        exact="TS2322 process.env.STRIPE_PUBLIC_KEY",
        paraphrase="compiler rejects pulling a payments credential from configuration since it could be unset",
        mixed="TS2322 compiler rejects pulling a payments credential since it could be unset",
    ),
    Incident(
        key="js-npm-eresolve-peer",
        cwd="/home/tom/work/checkout-ui",
        script="""
        U: npm install fails with ERESOLVE unable to resolve dependency tree after the React 18 upgrade
        $ npm install 2>&1 | sed -n '1,8p'
        > npm ERR! code ERESOLVE
        > npm ERR! ERESOLVE unable to resolve dependency tree
        > npm ERR! Found: react@18.3.1
        > npm ERR! Could not resolve dependency:
        > npm ERR! peer react@"^16.8.0 || ^17.0.0" from react-beautiful-dnd@13.1.1
        A: react-beautiful-dnd declares a peer range that stops at React 17 and the project is archived, so there will be no release that allows 18. It does work with 18 in practice, but the clean path is the maintained fork `@hello-pangea/dnd`, which is API compatible.
        $ npm uninstall react-beautiful-dnd && npm install @hello-pangea/dnd && grep -rl "react-beautiful-dnd" src | xargs sed -i 's#react-beautiful-dnd#@hello-pangea/dnd#'
        > added 3 packages, removed 4 packages
        A: No `--legacy-peer-deps` needed, and drag and drop on the board still works.
        """,
        exact="ERESOLVE unable to resolve dependency tree react-beautiful-dnd",
        paraphrase="setup broke after moving the frontend framework to eighteen; abandoned sortable kanban plugin forbids it",
        mixed="ERESOLVE setup broke; abandoned sortable kanban plugin forbids the newer frontend framework",
        distractor="""
        U: after switching to npm 7 the install works but we get warnings: npm WARN ERESOLVE overriding peer dependency for eslint-plugin-react
        A: npm 7+ installs peer dependencies automatically and warns when it has to override a range. eslint-plugin-react wants eslint ^8 and the project pins eslint 9; upgrade the plugin to 7.37 which accepts eslint 9.
        A: Just a warning here, the tree resolves; nothing to do with React itself.
        """,
    ),
    Incident(
        key="js-webpack-moment-locales",
        cwd="/home/ana/src/dashboard-web",
        script="""
        U: main.js grew from 480 KB to 1.1 MB, what happened?
        $ npx webpack --profile --json > stats.json && npx webpack-bundle-analyzer stats.json --mode static -r report.html && grep -o 'moment/locale/[a-z-]*\\.js' stats.json | sort -u | wc -l
        > 134
        A: The new date picker imports `moment`, and moment's `require('./locale/' + name)` makes webpack bundle all 134 locale files (~330 KB minified). We only need en and de.
        ~ webpack.config.js
        > +    new webpack.ContextReplacementPlugin(/moment[/\\\\]locale$/, /^\\.\\/(en-gb|de)$/),
        $ npx webpack --mode production | grep main
        > main.7c1f.js  612 KiB
        A: Down to 612 KB. Replacing moment with date-fns in the picker would remove the rest, that is a bigger change.
        """,
        exact="moment/locale ContextReplacementPlugin",
        paraphrase="shipped JavaScript more than doubled because a calendar widget drags in all translations",
        mixed="webpack-bundle-analyzer showed a calendar widget pulling every translation",
    ),
    Incident(
        key="js-cors-preflight",
        cwd="/home/tom/work/orders-api",
        script="""
        U: the SPA on app.example.com gets "Access to fetch at 'https://api.example.com/orders' has been blocked by CORS policy: Response to preflight request doesn't pass access control check: No 'Access-Control-Allow-Origin' header is present" — but GET works
        A: The POST sends `Content-Type: application/json` and an `X-Request-Id` header, which makes it a non-simple request, so the browser sends an OPTIONS preflight first. Our Express app has `cors()` only on the router, after the auth middleware, which rejects the OPTIONS with 401 and no CORS headers.
        $ curl -si -X OPTIONS https://api.example.com/orders -H 'Origin: https://app.example.com' -H 'Access-Control-Request-Method: POST' | head -1
        > HTTP/2 401
        ~ src/app.ts
        > +app.options("*", cors(corsOptions));
        > +app.use(cors(corsOptions));
        >  app.use(requireAuth);
        A: Preflights are answered before authentication now, with `allowedHeaders: ["Content-Type", "X-Request-Id", "Authorization"]`.
        """,
        exact="No 'Access-Control-Allow-Origin' header is present",
        paraphrase="cross-site submissions refused for our single page frontend since login guards the probe",
        mixed="preflight: cross-site submissions refused for our single page frontend since login guards the probe",
        distractor="""
        U: cookies are not sent from app.example.com to api.example.com even though CORS works
        A: `fetch` needs `credentials: "include"` and the API must answer with `Access-Control-Allow-Credentials: true` and an explicit origin (not `*`). The session cookie also needs `SameSite=None; Secure`.
        A: The preflight itself was fine; it was only about credentials.
        """,
    ),
    Incident(
        key="js-maxlisteners-leak",
        cwd="/home/ana/src/realtime-hub",
        script="""
        U: we see (node:4121) MaxListenersExceededWarning: Possible EventEmitter memory leak detected. 11 message listeners added to [Redis]. and memory grows
        @ src/subscriptions.ts
        > export function subscribe(socket: WebSocket, channel: string) {
        >   redisSub.on("message", (ch, payload) => {
        >     if (ch === channel) socket.send(payload);
        >   });
        > }
        A: Every websocket subscription adds a new "message" listener to the single Redis subscriber and never removes it, so closed sockets stay referenced forever (that is the leak; the warning fires at 11).
        ~ src/subscriptions.ts
        > -  redisSub.on("message", (ch, payload) => {
        > -    if (ch === channel) socket.send(payload);
        > -  });
        > +  const onMessage = (ch: string, payload: string) => { if (ch === channel) socket.send(payload); };
        > +  redisSub.on("message", onMessage);
        > +  socket.once("close", () => redisSub.off("message", onMessage));
        A: Better still: one listener and a Map from channel to a Set of sockets; I can do that next if fan-out grows.
        """,
        exact="MaxListenersExceededWarning: Possible EventEmitter memory leak detected",
        paraphrase="broadcast relay bloats RAM since each browser tab registers a handler nobody detaches",
        mixed="MaxListenersExceededWarning: broadcast relay bloats RAM, each browser tab registers a handler nobody detaches",
    ),
    Incident(
        key="js-express-unhandled-rejection",
        cwd="/home/tom/work/orders-api",
        script="""
        U: the API process dies with "UnhandledPromiseRejection: This error originated either by throwing inside of an async function without a catch block" when the DB is briefly down
        @ src/routes/orders.ts
        > router.get("/orders/:id", async (req, res) => {
        >   const order = await db.orders.findById(req.params.id);
        >   res.json(order);
        > });
        A: Express 4 does not await route handlers: a rejected promise never reaches the error middleware, and since Node 15 an unhandled rejection terminates the process.
        $ npm ls express
        > orders-api@1.0.0 /home/tom/work/orders-api
        > └── express@4.19.2
        A: Upgrading to Express 5 (which forwards rejected promises to `next(err)`) is the real fix; for now I added `express-async-errors`, which patches the router to do the same, and a 503 error handler for connection errors.
        ~ src/app.ts
        > +import "express-async-errors";
        """,
        exact="UnhandledPromiseRejection throwing inside of an async function without a catch block",
        paraphrase="backend exits whenever the database blips, since failing coroutine endpoints escape the framework",
        mixed="express-async-errors: backend exits whenever the database blips",
    ),
    Incident(
        key="js-vite-hmr-docker",
        cwd="/home/ana/src/storefront",
        script="""
        U: running vite dev inside docker compose, edits on my Mac don't trigger reloads, I have to restart the container
        A: The source is bind-mounted from macOS; file change events (inotify) do not cross the Docker Desktop VM boundary reliably, so chokidar never sees the edits.
        ~ vite.config.ts
        >    server: {
        > +    watch: { usePolling: true, interval: 300 },
        > +    hmr: { clientPort: 5173 },
        >      host: "0.0.0.0",
        $ docker compose up -d web && docker compose logs -f web | grep -m1 "hmr update"
        > 10:42:07 AM [vite] hmr update /src/components/Cart.tsx
        A: Polling costs some CPU (about 3% here). `clientPort` is needed because the browser connects to the port published on the host.
        """,
        exact="usePolling hmr clientPort",
        paraphrase="instant refresh stops for the bundler virtualized on an Apple laptop",
        mixed="usePolling instant refresh stops for the bundler virtualized on an Apple laptop",
    ),
    Incident(
        key="js-react-stale-closure-interval",
        cwd="/home/ana/src/dashboard-web",
        script="""
        U: my countdown component shows 59 and then stays at 59
        @ src/components/Countdown.tsx
        > const [left, setLeft] = useState(60);
        > useEffect(() => {
        >   const id = setInterval(() => setLeft(left - 1), 1000);
        >   return () => clearInterval(id);
        > }, []);
        A: The interval callback closes over `left` from the first render (60), because the effect runs once. Every tick computes 60 - 1 = 59.
        ~ src/components/Countdown.tsx
        > -  const id = setInterval(() => setLeft(left - 1), 1000);
        > +  const id = setInterval(() => setLeft((prev) => Math.max(0, prev - 1)), 1000);
        A: The functional updater always receives the current value. I also clamp at 0 and stop the interval when it reaches zero.
        """,
        exact="setInterval(() => setLeft(left - 1), 1000)",
        paraphrase="timer widget decreases once then sticks, since the periodic closure captured an outdated number",
        mixed="setInterval timer widget freezes after one decrement",
    ),
    Incident(
        key="js-array-sort-lexicographic",
        cwd="/home/tom/work/leaderboard",
        script="""
        U: leaderboard ranks look random: a player with 9 points is above one with 10, and 100 sits between 1 and 2
        $ node -e "console.log([100, 9, 10, 2, 1].sort())"
        > [ 1, 10, 100, 2, 9 ]
        A: `Array.prototype.sort()` without a comparator converts elements to strings and sorts them in UTF-16 code unit order, so "10" < "9".
        ~ src/ranking.js
        > -  return players.sort().reverse();
        > +  return [...players].sort((a, b) => b.points - a.points || a.name.localeCompare(b.name));
        A: Also copying before sorting, because `sort` mutates the array that the store still holds.
        """,
        exact="[ 1, 10, 100, 2, 9 ]",
        paraphrase="scoreboard wrong: nine listed above ten since numbers get ranked like words",
        mixed="localeCompare tie-break added after the scoreboard put nine above ten",
    ),
    Incident(
        key="js-date-parse-utc-off-by-one",
        cwd="/home/tom/work/booking-web",
        script="""
        U: customers in New York see their booking one day earlier than they picked. Booking date comes from the API as "2026-03-08"
        $ TZ=America/New_York node -e 'console.log(new Date("2026-03-08").toDateString())'
        > Sat Mar 07 2026
        A: A date-only ISO string is parsed as UTC midnight per the spec; displayed in New York (UTC-5) that is 19:00 on the previous day.
        ~ src/format.ts
        > -export const showDay = (iso: string) => new Date(iso).toDateString();
        > +export const showDay = (iso: string) => {
        > +  const [y, m, d] = iso.split("-").map(Number);
        > +  return new Date(y, m - 1, d).toDateString();
        > +};
        A: Constructing from parts uses local midnight. Since these are calendar days, not instants, I would keep them as plain strings in state and only format them.
        """,
        exact='new Date("2026-03-08") Sat Mar 07 2026',
        paraphrase="east-coast clients view reservations shifted back since a bare yyyy-mm-dd is interpreted as Greenwich",
        mixed="toDateString: east-coast clients view reservations shifted back, bare yyyy-mm-dd interpreted as Greenwich",
        distractor="""
        U: the booking confirmation shows 1:00 AM instead of midnight for dates after March 8
        A: The server formats with a fixed offset of -05:00 computed once at boot; after the DST switch New York is -04:00. Use Intl.DateTimeFormat with timeZone "America/New_York" per date.
        A: Not a date-only parsing issue, the offset was cached.
        """,
    ),
    Incident(
        key="js-next-dynamic-server-usage",
        cwd="/home/ana/src/storefront",
        script="""
        U: next build fails: Error: Dynamic server usage: Route /account couldn't be rendered statically because it used `cookies`.
        A: The /account page reads cookies() to find the session, which can only happen per request, but the route has `export const dynamic = "force-static"` left over from a template.
        $ grep -rn "force-static" app/account
        > app/account/page.tsx:3:export const dynamic = "force-static";
        ~ app/account/page.tsx
        > -export const dynamic = "force-static";
        > +export const dynamic = "force-dynamic";
        $ npx next build | grep account
        > ƒ /account                              2.1 kB         96 kB
        A: It is marked ƒ (dynamic) now and the build passes.
        """,
        exact="Dynamic server usage: Route /account couldn't be rendered statically",
        paraphrase="production compile of the React meta-framework breaks: user-specific screen touching headers was pinned prerendered",
        mixed="force-static user-specific screen touching headers was pinned prerendered",
    ),
    Incident(
        key="js-pnpm-phantom-dependency",
        cwd="/home/tom/work/monorepo",
        script="""
        U: packages/worker runs fine locally but the docker image crashes: Error: Cannot find module 'lodash'
        $ grep -n lodash packages/worker/package.json; pnpm why lodash --filter worker
        > (no match)
        > dependencies:
        > @acme/shared 1.0.0
        > └── lodash 4.17.21
        A: worker imports lodash directly but never declares it; locally it resolves because of the hoisted copy from @acme/shared at the repo root. The Dockerfile runs `pnpm deploy --filter worker`, which installs only declared deps, so lodash is missing there.
        $ pnpm add lodash --filter worker
        > Progress: resolved 612, reused 612, downloaded 0, added 0, done
        A: Declared now. I also set `hoist=false` in .npmrc so undeclared imports fail locally too.
        """,
        exact="Cannot find module 'lodash' pnpm why",
        paraphrase="shipped artifact for one subproject dies at boot; utility library unlisted, borrowed from a sibling",
        mixed="lodash unlisted, borrowed from a sibling, so one subproject dies at boot",
    ),
    Incident(
        key="js-heap-out-of-memory-build",
        cwd="/home/ana/src/dashboard-web",
        script="""
        U: CI build dies: FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory
        $ grep -E "heap|Killed|ts-loader" ci.log | tail -3
        > <--- Last few GCs --->
        > [1877:0x5c5e] 98211 ms: Mark-Compact 2038.4 (2083.2) -> 2027.9 (2084.9) MB
        > FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory
        A: The old space fills at ~2 GB. ts-loader type-checks every file in the webpack process; the project grew past what fits.
        ~ webpack.config.js
        > -        use: "ts-loader",
        > +        use: { loader: "ts-loader", options: { transpileOnly: true } },
        > +  plugins: [new ForkTsCheckerWebpackPlugin()],
        A: Type checking moves to a separate process; the build process peaks at 900 MB now. As a stopgap `NODE_OPTIONS=--max-old-space-size=4096` would also work, but the runner has 7 GB in total.
        """,
        exact="Reached heap limit Allocation failed - JavaScript heap out of memory",
        paraphrase="frontend compile in the pipeline crashes when V8 exhausts its two gigabytes, since typings get verified inline",
        mixed="transpileOnly keeps the compile from exhausting V8",
    ),
    Incident(
        key="js-safari-invalid-date",
        cwd="/home/tom/work/booking-web",
        script="""
        U: on iPhones the booking list shows "Invalid Date" everywhere, Chrome is fine
        $ node -e 'console.log(new Date("2026-03-08 10:00:00").toISOString())'
        > 2026-03-08T10:00:00.000Z
        A: V8 accepts "2026-03-08 10:00:00" (space instead of T) as an extension, Safari's JavaScriptCore follows the spec strictly and returns Invalid Date. The API sends the MySQL DATETIME format.
        ~ src/api/bookings.ts
        > -    startsAt: new Date(row.starts_at),
        > +    startsAt: new Date(row.starts_at.replace(" ", "T") + "Z"),
        A: Better to have the API emit ISO 8601 with an offset; I opened a ticket for the backend. The Z assumes the column is stored in UTC, which it is.
        """,
        exact='"Invalid Date" new Date("2026-03-08 10:00:00")',
        paraphrase="iOS devices display broken timestamps for reservations since WebKit rejects a database-ish layout",
        mixed="JavaScriptCore rejects a database-ish layout so iOS devices display broken timestamps for reservations",
    ),
    Incident(
        key="css-zindex-stacking-context",
        cwd="/home/ana/src/dashboard-web",
        script="""
        U: the modal has z-index: 9999 but the sticky header still covers it
        @ src/components/Card.module.css
        > .card {
        >   transform: translateZ(0);
        >   position: relative;
        > }
        A: The modal is rendered inside `.card`, and `transform` creates a new stacking context: z-index 9999 only applies within the card, which itself sits under the header (z-index 10).
        A: Render the modal through a portal into document.body, so it stacks at the root.
        ~ src/components/Modal.tsx
        > -  return <div className={styles.backdrop}>{children}</div>;
        > +  return createPortal(<div className={styles.backdrop}>{children}</div>, document.body);
        U: perfect, it's above everything now
        """,
        exact="z-index: 9999 translateZ(0)",
        paraphrase="popup dialog hidden beneath the fixed top bar despite a huge layering value, due to an ancestor GPU hint",
        mixed="createPortal fix for a popup dialog hidden beneath the top bar",
        distractor="""
        U: the dropdown inside the card gets cut off at the card edge
        A: `.card` has `overflow: hidden` for its rounded corners, which clips any absolutely positioned child. Either move the dropdown to a portal or use `overflow: clip` with `overflow-clip-margin`.
        A: Not a z-index stacking issue: the menu was clipped, not covered.
        """,
    ),
    Incident(
        key="js-redux-mutation-no-rerender",
        cwd="/home/tom/work/checkout-ui",
        script="""
        U: adding an item to the cart updates the store (I see it in Redux DevTools) but CartList doesn't re-render
        @ src/store/cartReducer.js
        > case ADD_ITEM:
        >   state.items.push(action.item);
        >   return state;
        A: The reducer mutates `state.items` and returns the same object. react-redux compares selected values by reference; `state.items` is the same array, so the component thinks nothing changed.
        ~ src/store/cartReducer.js
        > -  state.items.push(action.item);
        > -  return state;
        > +  return { ...state, items: [...state.items, action.item] };
        A: Moving this slice to Redux Toolkit's createSlice would let you write `push` safely (Immer). I added redux-immutable-state-invariant in development to catch the next mutation.
        """,
        exact="state.items.push(action.item)",
        paraphrase="shopping basket view stays stale though the inspector shows the product, since data was modified in place",
        mixed="CartList stays stale though the inspector shows the product, since data was modified in place",
    ),
    Incident(
        key="js-axios-refresh-loop",
        cwd="/home/tom/work/booking-web",
        script="""
        U: when the refresh token expires the app hammers POST /auth/refresh hundreds of times a second
        @ src/api/client.ts
        > api.interceptors.response.use(undefined, async (error) => {
        >   if (error.response?.status === 401) {
        >     await api.post("/auth/refresh");
        >     return api(error.config);
        >   }
        >   throw error;
        > });
        A: The refresh call itself goes through `api`, so when it returns 401 the interceptor fires again for it: infinite recursion. And parallel requests each start their own refresh.
        ~ src/api/client.ts
        > -  if (error.response?.status === 401) {
        > -    await api.post("/auth/refresh");
        > +  if (error.response?.status === 401 && !error.config._retried && !error.config.url.endsWith("/auth/refresh")) {
        > +    error.config._retried = true;
        > +    refreshing ??= api.post("/auth/refresh").finally(() => { refreshing = null; });
        > +    await refreshing;
        A: One shared refresh promise, one retry per request, and a 401 from the refresh endpoint now logs the user out.
        """,
        exact="api.interceptors.response.use /auth/refresh",
        paraphrase="frontend floods the backend with renewal attempts once the long-lived credential lapses",
        mixed="interceptors: frontend floods the backend with renewal attempts once the long-lived credential lapses",
        distractor="""
        U: users get logged out after exactly 15 minutes even while active
        A: The access token lifetime is 15 minutes and the app never calls /auth/refresh because the refresh cookie is set with Path=/api while the endpoint is /auth/refresh. Set the cookie path to /.
        A: No retry loop; the refresh simply never happened.
        """,
    ),
    Incident(
        key="js-graphql-n-plus-one-dataloader",
        cwd="/home/ana/src/catalog-graphql",
        script="""
        U: the products query with `vendor { name }` takes 2.4 s for 200 products; the database log shows hundreds of identical selects
        $ grep -c 'SELECT \\* FROM vendors WHERE id = \\$1' logs/pg-slow.log
        > 200
        A: Classic N+1: the `Product.vendor` resolver runs once per product and each does its own query.
        ~ src/resolvers/product.ts
        > -  vendor: (p, _args, ctx) => ctx.db.vendors.findById(p.vendorId),
        > +  vendor: (p, _args, ctx) => ctx.loaders.vendor.load(p.vendorId),
        ~ src/context.ts
        > +  loaders: { vendor: new DataLoader((ids) => batchVendors(db, ids)) },
        A: DataLoader collects the ids within one tick and issues a single `WHERE id = ANY($1)`. Loaders are created per request so caching never leaks between users. Query time is 90 ms now.
        """,
        exact="DataLoader batchVendors",
        paraphrase="schema-based listing sluggish: per-item seller lookup makes its own roundtrip",
        mixed="DataLoader for a sluggish listing: per-item seller lookup makes its own roundtrip",
    ),
    Incident(
        key="js-playwright-flaky-click",
        cwd="/home/tom/work/checkout-ui",
        script="""
        U: e2e test "pays with saved card" fails about one run in five on CI: locator.click: Timeout 30000ms exceeded ... element is not stable
        $ npx playwright show-trace test-results/pay-saved-card/trace.zip --list | grep -m3 -i anim
        > waiting for element to be visible, enabled and stable
        > element is not stable - waiting...
        > .drawer--opening { animation: slide-in 400ms }
        A: The payment drawer slides in with a CSS animation; on the slower CI runners the button is still moving when Playwright tries to click, and the drawer re-renders when the saved cards request finishes, detaching the node.
        ~ e2e/pay.spec.ts
        > -  await page.getByRole("button", { name: "Pay now" }).click();
        > +  await expect(page.getByTestId("saved-cards")).toBeVisible();
        > +  await page.getByRole("button", { name: "Pay now" }).click();
        A: And in playwright.config the CI project now sets `reducedMotion: "reduce"`, which our CSS honours. 50 repeated runs pass.
        """,
        exact="locator.click: Timeout 30000ms exceeded element is not stable",
        paraphrase="browser automation scenario intermittently breaks because the sliding panel keeps gliding during the tap",
        mixed="reducedMotion: browser automation scenario intermittently breaks, sliding panel keeps gliding during the tap",
    ),
    Incident(
        key="js-npm-ci-lock-out-of-sync",
        cwd="/home/tom/work/orders-api",
        script="""
        U: pipeline step `npm ci` fails: npm ci can only install packages when your package.json and package-lock.json or npm-shrinkwrap.json are in sync.
        $ npm ci 2>&1 | grep -A2 "Missing:"
        > npm ERR! Missing: zod@3.23.8 from lock file
        A: zod was added to package.json by a merge from the validation branch, but the lock file from main won the conflict resolution, so the lock has no zod entry.
        $ npm install --package-lock-only && git diff --stat package-lock.json
        >  package-lock.json | 14 ++++++++++++++
        A: Regenerated just the lock without touching node_modules. I also added `npm ci --dry-run` as a pre-push hook.
        """,
        exact="package.json and package-lock.json or npm-shrinkwrap.json are in sync",
        paraphrase="reproducible setup in automation refuses since a schema library got declared yet lacks a pinned record",
        mixed="zod declared yet lacks a pinned record, so reproducible setup in automation refuses",
    ),
    Incident(
        key="js-service-worker-stale",
        cwd="/home/ana/src/storefront",
        script="""
        U: after each deploy some users still get the old JS for days and hit "ChunkLoadError: Loading chunk 412 failed"
        A: The Workbox service worker precaches index.html; an old index references chunk hashes that no longer exist on the CDN. The new worker waits until every tab is closed before activating.
        @ src/sw.ts
        > precacheAndRoute(self.__WB_MANIFEST);
        > registerRoute(({ request }) => request.mode === "navigate", new CacheFirst());
        ~ src/sw.ts
        > -registerRoute(({ request }) => request.mode === "navigate", new CacheFirst());
        > +registerRoute(({ request }) => request.mode === "navigate", new NetworkFirst({ networkTimeoutSeconds: 3 }));
        > +self.addEventListener("message", (e) => { if (e.data === "SKIP_WAITING") self.skipWaiting(); });
        A: Navigations go network-first now, the page prompts "new version available" and posts SKIP_WAITING, and the CDN keeps the previous release's chunks for 7 days so open tabs can still lazy-load.
        """,
        exact="ChunkLoadError: Loading chunk 412 failed",
        paraphrase="visitors stuck on an outdated frontend well after shipping, the offline layer returning stale markup",
        mixed="Workbox: visitors stuck on an outdated frontend well after shipping",
    ),
    Incident(
        key="js-stream-backpressure",
        cwd="/home/tom/work/orders-api",
        script="""
        U: exporting all orders as CSV (2M rows) makes the API use 3 GB RAM and sometimes crash
        @ src/routes/export.ts
        > for await (const row of db.orders.cursor()) {
        >   res.write(toCsvLine(row));
        > }
        > res.end();
        A: `res.write` returns false when the socket buffer is full, but the loop ignores it and keeps producing rows, so everything queues in memory when the client downloads slower than the DB reads.
        ~ src/routes/export.ts
        > -for await (const row of db.orders.cursor()) {
        > -  res.write(toCsvLine(row));
        > -}
        > -res.end();
        > +await pipeline(Readable.from(db.orders.cursor()), new CsvTransform(), res);
        A: `stream.pipeline` honours backpressure and destroys everything if the client disconnects. Peak RSS during the export is 180 MB now.
        """,
        exact="res.write(toCsvLine(row))",
        paraphrase="two million purchases dumped as spreadsheet text balloons resident size; flow control disregarded",
        mixed="backpressure: two million purchases dumped as spreadsheet text balloons resident size",
    ),
    Incident(
        key="js-react-key-index",
        cwd="/home/ana/src/dashboard-web",
        script="""
        U: in the invoice lines editor, when I delete the second line, the text in the inputs shifts: the third line now shows the deleted line's note
        @ src/components/LineEditor.tsx
        > {lines.map((line, i) => (
        >   <LineRow key={i} line={line} onDelete={() => remove(i)} />
        > ))}
        A: With `key={i}`, after deleting index 1 the old row 2 becomes index 1 and React reuses the component (and its uncontrolled input state) of the deleted row for it.
        ~ src/components/LineEditor.tsx
        > -  <LineRow key={i} line={line} onDelete={() => remove(i)} />
        > +  <LineRow key={line.id} line={line} onDelete={() => remove(line.id)} />
        A: New lines get an id from crypto.randomUUID() when they are created, so the key is stable.
        """,
        exact="<LineRow key={i}",
        paraphrase="dropping an entry from the billing form makes subsequent fields display wrong remarks; positional identity",
        mixed="LineRow: dropping an entry from the billing form makes subsequent fields display wrong remarks",
    ),
    Incident(
        key="js-webpack5-node-polyfill",
        cwd="/home/tom/work/leaderboard",
        script="""
        U: after upgrading to webpack 5: Module not found: Error: Can't resolve 'crypto' in node_modules/jsonwebtoken/lib. BREAKING CHANGE: webpack < 5 used to include polyfills for node.js core modules by default.
        A: jsonwebtoken is a Node library; webpack 4 silently bundled a browser polyfill for `crypto`. Verifying JWTs in the browser is not needed here, the app only reads the payload.
        $ grep -rn "jsonwebtoken" src
        > src/auth/session.js:1:import jwt from "jsonwebtoken";
        > src/auth/session.js:9:  return jwt.decode(token);
        ~ src/auth/session.js
        > -import jwt from "jsonwebtoken";
        > +import { jwtDecode } from "jwt-decode";
        A: jwt-decode is 1 KB and browser-native; no `resolve.fallback` polyfills required.
        """,
        exact="Can't resolve 'crypto' BREAKING CHANGE: webpack < 5 used to include polyfills",
        paraphrase="after a major packer bump the SPA failed compiling because a server-side signing package wants platform builtins",
        mixed="jsonwebtoken wants platform builtins after a major packer bump",
    ),
)
