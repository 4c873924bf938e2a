"""Incidents from infrastructure work: containers, Kubernetes, CI, Terraform, proxies, TLS, auth, cloud."""

# Session scripts are transcript text: wrapping their lines would change the messages.
# ruff: noqa: E501

from __future__ import annotations

from bench.quality.incident import Incident

INCIDENTS: tuple[Incident, ...] = (
    Incident(
        key="docker-layer-cache-order",
        cwd="/home/maya/src/ingest-worker",
        script="""
        U: every docker build reinstalls all Python deps (4 minutes) even when I only change one line of code
        @ Dockerfile
        > FROM python:3.12-slim
        > WORKDIR /app
        > COPY . .
        > RUN pip install -r requirements.txt
        A: `COPY . .` comes before the install, so any source change invalidates that layer and every layer after it, including pip install.
        ~ Dockerfile
        > -COPY . .
        > -RUN pip install -r requirements.txt
        > +COPY requirements.txt .
        > +RUN --mount=type=cache,target=/root/.cache/pip pip install -r requirements.txt
        > +COPY . .
        $ docker build -t ingest-worker . 2>&1 | grep -E "CACHED|pip install"
        >  => CACHED [3/5] COPY requirements.txt .
        >  => CACHED [4/5] RUN --mount=type=cache,target=/root/.cache/pip pip install -r requirements.txt
        A: Code-only rebuilds take 6 s now. I also added a .dockerignore for .git and .venv so the context is 3 MB instead of 900 MB.
        """,
        exact="COPY requirements.txt RUN --mount=type=cache,target=/root/.cache/pip",
        paraphrase="every fresh containerized compile redoes all third-party setup after the tiniest tweak",
        mixed=".dockerignore: every fresh containerized compile redoes all third-party setup",
        distractor="""
        U: docker build fails with "failed to compute cache key: "/requirements-dev.txt" not found"
        A: .dockerignore excludes `requirements*` except requirements.txt, so requirements-dev.txt is not in the build context. Add `!requirements-dev.txt` to .dockerignore.
        A: Layer caching works fine here; the file just was not sent to the builder.
        """,
    ),
    Incident(
        key="docker-entrypoint-crlf",
        cwd="/home/ana/src/storefront",
        script="""
        U: container exits immediately with: exec /usr/local/bin/docker-entrypoint.sh: no such file or directory. The file is definitely there!
        $ docker run --rm --entrypoint sh storefront:dev -c "head -1 /usr/local/bin/docker-entrypoint.sh | od -c | head -2"
        > 0000000   #   !   /   b   i   n   /   s   h  \\r  \\n
        A: The shebang line ends in `\\r\\n`: the script was checked out on Windows with CRLF line endings, so the kernel looks for an interpreter literally named "/bin/sh\\r", which does not exist, hence "no such file or directory".
        ~ .gitattributes
        > +*.sh text eol=lf
        $ git add --renormalize . && git status --short | head -2
        >  M docker/docker-entrypoint.sh
        A: .gitattributes forces LF for shell scripts regardless of core.autocrlf; after renormalizing, the image starts on every machine.
        """,
        exact="exec /usr/local/bin/docker-entrypoint.sh: no such file or directory",
        paraphrase="boot launcher reportedly absent though present, since DOS-style newlines corrupted its first row",
        mixed=".gitattributes: boot launcher reportedly absent though present, DOS-style newlines",
    ),
    Incident(
        key="docker-exec-format-arm64",
        cwd="/Users/jonas/code/invoice-svc",
        script="""
        U: the image I built on my M2 Mac crashes on the EC2 box: exec /usr/local/bin/python3: exec format error
        $ docker image inspect invoice-svc:latest --format '{{.Architecture}}'
        > arm64
        A: Apple Silicon builds arm64 images by default; the x86_64 EC2 instance cannot execute arm64 binaries.
        $ docker buildx build --platform linux/amd64,linux/arm64 -t registry.acme.io/invoice-svc:1.8.0 --push .
        >  => pushing manifest for registry.acme.io/invoice-svc:1.8.0@sha256:5b1e...
        A: A multi-arch manifest now serves the right variant to each host. CI builds release images anyway; I changed the Makefile so local pushes also go through buildx with both platforms.
        """,
        exact="exec format error arm64",
        paraphrase="package produced on a MacBook refuses launching on Intel cloud VM owing to processor mismatch",
        mixed="buildx: package produced on a MacBook refuses launching on Intel cloud VM",
    ),
    Incident(
        key="k8s-liveness-crashloop",
        cwd="/home/omar/work/deploy-manifests",
        script="""
        U: after the Spring Boot 3 upgrade the pods are in CrashLoopBackOff, logs look normal until they get killed
        $ kubectl describe pod settlement-api-7c9f-2kqvx | grep -A3 -E "Liveness|Killing"
        >     Liveness:   http-get http://:8080/actuator/health delay=10s timeout=1s period=5s #success=1 #failure=3
        >   Warning  Unhealthy  Liveness probe failed: Get "http://10.4.2.17:8080/actuator/health": dial tcp 10.4.2.17:8080: connect: connection refused
        >   Normal   Killing    Container settlement-api failed liveness probe, will be restarted
        A: Startup now takes ~45 s (Hibernate validation on 600 entities), but the liveness probe starts after 10 s and kills the container after 3 failures, i.e. at ~25 s, before it ever finishes starting.
        ~ k8s/settlement-api/deployment.yaml
        > +          startupProbe:
        > +            httpGet: { path: /actuator/health/liveness, port: 8080 }
        > +            periodSeconds: 5
        > +            failureThreshold: 24
        A: A startupProbe gives it up to 120 s; liveness only applies once startup succeeded.
        """,
        exact="CrashLoopBackOff Liveness probe failed actuator/health",
        paraphrase="orchestrator terminates the Java service during its slow warmup since the aliveness check is too impatient",
        mixed="startupProbe: orchestrator terminates the Java service during its slow warmup",
        distractor="""
        U: settlement-api pods are in CrashLoopBackOff right after deploy, exit code 1
        $ kubectl logs settlement-api-7c9f-2kqvx --previous | tail -2
        > APPLICATION FAILED TO START
        > Failed to bind properties under 'spring.datasource.url' to java.lang.String: Property: spring.datasource.url Value: ""
        A: The secret key was renamed from DB_URL to DATABASE_URL in Vault but not in the deployment env. No probe involved, the app itself exits.
        """,
    ),
    Incident(
        key="k8s-oomkilled-jvm",
        cwd="/home/omar/work/deploy-manifests",
        script="""
        U: the pod restarts every few hours with Last State: Terminated Reason: OOMKilled Exit Code: 137
        $ kubectl exec settlement-api-7c9f-2kqvx -- java -XX:+PrintFlagsFinal -version 2>/dev/null | grep -E "MaxHeapSize|UseContainerSupport"
        >    size_t MaxHeapSize = 1610612736
        >      bool UseContainerSupport = true
        A: Container limit is 2 GiB and the heap may grow to 1.5 GiB; with metaspace, thread stacks (200 threads × 1 MB), direct buffers for Netty and the code cache, total RSS exceeds 2 GiB and the kernel OOM killer ends it.
        ~ k8s/settlement-api/deployment.yaml
        > -              value: "-XX:MaxRAMPercentage=75"
        > +              value: "-XX:MaxRAMPercentage=60 -XX:MaxDirectMemorySize=192m -Xss512k"
        A: Heap capped at 60% (1.2 GiB) leaves headroom for native memory. NMT (`-XX:NativeMemoryTracking=summary`) confirmed ~550 MB non-heap at peak.
        """,
        exact="Reason: OOMKilled Exit Code: 137",
        paraphrase="JVM replica periodically reaped since garbage-collected area plus off-managed overhead surpass the quota",
        mixed="MaxRAMPercentage: JVM replica periodically reaped, garbage-collected area surpasses the quota",
    ),
    Incident(
        key="k8s-imagepullbackoff-secret",
        cwd="/home/omar/work/deploy-manifests",
        script="""
        U: new namespace staging-eu, pods stuck in ImagePullBackOff
        $ kubectl -n staging-eu describe pod courier-api-5d8b-x7t2m | grep -A2 "Failed to pull"
        >   Warning  Failed  kubelet  Failed to pull image "registry.acme.io/courier-api:2.4.1": failed to authorize: failed to fetch anonymous token: unexpected status from GET request: 401 Unauthorized
        A: The registry requires credentials; in the other namespaces the `acme-registry` pull secret exists and is referenced by the default service account, but secrets are namespaced and staging-eu has none.
        $ kubectl get secret acme-registry -n staging -o yaml | sed 's/namespace: staging/namespace: staging-eu/' | kubectl apply -f - && kubectl -n staging-eu patch serviceaccount default -p '{"imagePullSecrets":[{"name":"acme-registry"}]}'
        > secret/acme-registry created
        > serviceaccount/default patched
        A: Pods pulled and started. Long term the namespace template in our Terraform should create the secret.
        """,
        exact="ImagePullBackOff failed to fetch anonymous token 401 Unauthorized",
        paraphrase="apps in a freshly made environment can't download artifacts since repository passwords were never copied there",
        mixed="imagePullSecrets: apps in a freshly made environment can't download artifacts",
    ),
    Incident(
        key="k8s-cross-namespace-dns",
        cwd="/home/omar/work/deploy-manifests",
        script="""
        U: courier-api can't reach the pricing service: getaddrinfo ENOTFOUND pricing
        A: Short names resolve only within the same namespace. courier-api runs in `courier`, pricing in `pricing`.
        $ kubectl -n courier exec deploy/courier-api -- cat /etc/resolv.conf
        > search courier.svc.cluster.local svc.cluster.local cluster.local
        > options ndots:5
        A: So "pricing" expands to pricing.courier.svc.cluster.local, which does not exist. Use `pricing.pricing.svc.cluster.local` (or at least `pricing.pricing`).
        ~ k8s/courier-api/configmap.yaml
        > -  PRICING_URL: http://pricing:8080
        > +  PRICING_URL: http://pricing.pricing.svc.cluster.local:8080
        A: Fully qualified with a trailing dot would also avoid the ndots:5 search-list lookups, worth it for hot paths.
        """,
        exact="getaddrinfo ENOTFOUND pricing",
        paraphrase="one microservice fails looking up another's hostname because they sit in separate tenancies",
        mixed="resolv.conf: one microservice fails looking up another's hostname across tenancies",
    ),
    Incident(
        key="helm-operation-in-progress",
        cwd="/home/omar/work/deploy-manifests",
        script="""
        U: helm upgrade fails: Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress
        $ helm history courier-api -n courier | tail -2
        > 41  	Thu Mar 12 17:02:11 2026	deployed       	courier-api-2.4.0	Upgrade complete
        > 42  	Thu Mar 12 17:40:55 2026	pending-upgrade	courier-api-2.4.1	Preparing upgrade
        A: Release 42 is stuck in pending-upgrade: the CI job running it was cancelled mid-upgrade, so Helm never recorded a final status and now refuses new operations.
        $ helm rollback courier-api 41 -n courier
        > Rollback was a success! Happy Helming!
        A: Rolled back to 41; the next upgrade goes through. I added `--atomic --timeout 10m` to the pipeline so an interrupted upgrade rolls itself back, and made the CI job non-cancellable during the helm step.
        """,
        exact="another operation (install/upgrade/rollback) is in progress",
        paraphrase="package manager for the orchestrator blocks further rollouts because an aborted earlier one stayed frozen",
        mixed="helm blocks further rollouts because an aborted earlier one stayed frozen",
    ),
    Incident(
        key="gha-cache-never-hits",
        cwd="/home/tom/work/monorepo",
        script="""
        U: our GitHub Actions cache step never hits, every run downloads all node_modules again
        @ .github/workflows/ci.yml
        >       - uses: actions/cache@v4
        >         with:
        >           path: ~/.pnpm-store
        >           key: pnpm-${{ hashFiles('package-lock.json') }}
        A: The repo uses pnpm, so there is no package-lock.json; `hashFiles` of a missing file is an empty string and the key is constant... but then it would hit. Let me check the logs.
        $ gh run view 8812331 --log | grep -E "Cache (not found|hit)|Cache saved|store path"
        > Cache not found for input keys: pnpm-
        > Warning: Path Validation Error: Path(s) specified in the action for caching do(es) not exist, hence no cache is being saved.
        A: Nothing is ever saved because ~/.pnpm-store does not exist: pnpm 9 keeps its store in ~/.local/share/pnpm/store. Simplest fix is setup-node's built-in cache keyed on pnpm-lock.yaml.
        ~ .github/workflows/ci.yml
        > -      - uses: actions/cache@v4
        > +      - uses: actions/setup-node@v4
        > +        with: { node-version: 22, cache: pnpm, cache-dependency-path: pnpm-lock.yaml }
        A: Second run: "Cache restored from key: node-cache-Linux-x64-pnpm-8f1c...", install down from 2m40s to 14s.
        """,
        exact="Path Validation Error: Path(s) specified in the action for caching do(es) not exist",
        paraphrase="hosted automation reinstalls all JavaScript libraries on each push since the reuse folder was pointing nowhere",
        mixed="actions/cache: hosted automation reinstalls all JavaScript libraries on each push",
        distractor="""
        U: the GitHub Actions cache restores but it's from main, not from my branch, and it's outdated
        A: Caches are scoped by branch: a PR can read caches from its base branch, but what it saves is only visible to that branch. That is by design; add `restore-keys: pnpm-` so a partial match is used and the new save happens at the end of the run.
        A: The cache does hit here, it just falls back to the base branch.
        """,
    ),
    Incident(
        key="gha-resource-not-accessible",
        cwd="/home/tom/work/monorepo",
        script="""
        U: the step that comments the coverage summary on PRs fails: HttpError: Resource not accessible by integration
        A: Since the org changed the default workflow permissions to read-only, GITHUB_TOKEN cannot write PR comments unless the workflow asks for it. And on PRs from forks the token is always read-only.
        ~ .github/workflows/coverage.yml
        > +permissions:
        > +  contents: read
        > +  pull-requests: write
        $ gh workflow run coverage.yml --ref feat/coverage-comment && sleep 60 && gh run list --workflow coverage.yml -L 1
        > completed	success	coverage	feat/coverage-comment	workflow_dispatch
        A: Works for branches in this repo. For forks we would need a `workflow_run` follow-up workflow that posts the comment with the base repo's token; I noted it in the issue.
        """,
        exact="HttpError: Resource not accessible by integration",
        paraphrase="automated test-percentage remark on merge proposals breaks since the built-in credential lost its scope",
        mixed="GITHUB_TOKEN: automated test-percentage remark on merge proposals breaks",
    ),
    Incident(
        key="ci-eaddrinuse-parallel",
        cwd="/home/tom/work/orders-api",
        script="""
        U: integration tests fail randomly in CI with Error: listen EADDRINUSE: address already in use :::3000
        A: Jest runs test files in parallel workers (4 on the CI runner), and each file starts the app with `app.listen(3000)`; two files at once collide on the port.
        ~ test/helpers/server.ts
        > -  const server = app.listen(3000);
        > +  const server = app.listen(0);
        > +  const { port } = server.address() as AddressInfo;
        > +  const baseUrl = `http://127.0.0.1:${port}`;
        A: Port 0 lets the OS pick a free port per worker, and tests use baseUrl. For supertest we could even skip listening entirely and pass `app`.
        $ npx jest --selectProjects integration --maxWorkers=4
        > Tests:       118 passed, 118 total
        """,
        exact="listen EADDRINUSE: address already in use :::3000",
        paraphrase="specs clash on the build machine as concurrent processes grab an identical hard-coded TCP number",
        mixed="EADDRINUSE: specs clash as concurrent processes grab an identical hard-coded TCP number",
    ),
    Incident(
        key="terraform-state-lock",
        cwd="/home/sam/infra/terraform-prod",
        script="""
        U: terraform plan hangs then fails: Error acquiring the state lock: ConditionalCheckFailedException: The conditional request failed. Lock Info: ID: 7e1c2f0a-... Who: runner@ci-41 Operation: OperationTypeApply Created: 2026-03-13 22:04:11
        A: The lock in the DynamoDB table was taken by a CI apply yesterday at 22:04 that was killed when the runner was preempted, so it was never released.
        $ gh run view --repo acme/infra 88121 | grep -E "status|conclusion"
        > status: completed
        > conclusion: cancelled
        A: Confirmed nothing is running any more; only then is force-unlock safe.
        $ terraform force-unlock -force 7e1c2f0a-4d51-4a5e-9a07-3f0d8e2c11b4
        > Terraform state has been successfully unlocked!
        A: I also checked that the cancelled apply had not half-applied anything: `terraform plan` shows no unexpected changes.
        """,
        exact="Error acquiring the state lock ConditionalCheckFailedException",
        paraphrase="provisioning tool blocked since an aborted automated deployment left its mutex entry behind",
        mixed="DynamoDB: provisioning tool blocked since an aborted automated deployment left its mutex entry",
        distractor="""
        U: terraform plan says "Error: Backend configuration changed" after I edited the S3 bucket key
        A: Changing the backend block requires `terraform init -migrate-state` so the state is copied to the new key. Nothing is locked; init just needs to run again.
        """,
    ),
    Incident(
        key="terraform-forces-replacement",
        cwd="/home/sam/infra/terraform-prod",
        script="""
        U: terraform plan wants to destroy and recreate the production database?! I only renamed the identifier variable
        $ terraform plan -no-color | grep -B2 -A3 "forces replacement"
        >   # aws_db_instance.main must be replaced
        > -/+ resource "aws_db_instance" "main" {
        >       ~ identifier = "orders-prod" -> "orders-prod-eu" # forces replacement
        A: `identifier` cannot be changed in place on RDS, so Terraform plans a destroy/create, which would delete the data (final snapshot aside). The rename is cosmetic; revert it.
        ~ rds.tf
        > -  identifier = var.db_identifier
        > +  identifier = "orders-prod"
        > +  lifecycle {
        > +    prevent_destroy = true
        > +  }
        A: prevent_destroy makes any plan that would destroy it fail loudly. I also enabled deletion_protection on the instance itself.
        """,
        exact="aws_db_instance.main must be replaced forces replacement",
        paraphrase="provisioning preview intended to wipe then rebuild the live relational store owing to a label tweak",
        mixed="aws_db_instance: preview intended to wipe then rebuild the live relational store",
    ),
    Incident(
        key="nginx-413-body-too-large",
        cwd="/home/maya/src/photo-site",
        script="""
        U: uploading photos over 1 MB fails with 413 Request Entity Too Large
        $ curl -s -o /dev/null -w "%{http_code}\\n" -F "file=@tests/fixtures/big.jpg" https://photos.example.com/api/upload
        > 413
        A: nginx's `client_max_body_size` defaults to 1m; the request never reaches the app.
        ~ deploy/nginx/photos.conf
        >      location /api/upload {
        > +        client_max_body_size 25m;
        > +        proxy_request_buffering off;
        A: 25 MB matches the app's own limit. With request buffering off nginx streams the body to the app instead of writing it to a temp file first.
        $ sudo nginx -t && sudo systemctl reload nginx && curl -s -o /dev/null -w "%{http_code}\\n" -F "file=@tests/fixtures/big.jpg" https://photos.example.com/api/upload
        > nginx: configuration file /etc/nginx/nginx.conf test is successful
        > 201
        """,
        exact="413 Request Entity Too Large client_max_body_size",
        paraphrase="picture submissions above one megabyte rejected at the web front door before arriving at Flask",
        mixed="413: picture submissions above one megabyte rejected at the front door",
        distractor="""
        U: big photo uploads fail after exactly 60 seconds with 504
        A: Uploads from slow connections take longer than `proxy_read_timeout 60s` while the app processes the file. Raised it to 300s for /api/upload and moved thumbnailing to a background job.
        A: The size limit was already fine here.
        """,
    ),
    Incident(
        key="nginx-websocket-upgrade",
        cwd="/home/ana/src/realtime-hub",
        script="""
        U: websocket connections work locally but through nginx they fail: WebSocket connection to 'wss://hub.example.com/ws' failed: Error during WebSocket handshake: Unexpected response code: 400
        A: nginx speaks HTTP/1.0 to upstreams by default and drops hop-by-hop headers such as Upgrade and Connection, so the backend receives a normal GET and answers 400.
        ~ deploy/nginx/hub.conf
        >      location /ws {
        >          proxy_pass http://hub_upstream;
        > +        proxy_http_version 1.1;
        > +        proxy_set_header Upgrade $http_upgrade;
        > +        proxy_set_header Connection "upgrade";
        > +        proxy_read_timeout 3600s;
        A: The long read timeout keeps idle sockets from being cut after 60 s; the client also pings every 25 s.
        """,
        exact="Error during WebSocket handshake: Unexpected response code: 400",
        paraphrase="live bidirectional channels break behind the reverse front door since protocol switching fields are stripped",
        mixed="$http_upgrade: live bidirectional channels break, protocol switching fields stripped",
    ),
    Incident(
        key="letsencrypt-http01-firewall",
        cwd="/home/sam/infra/edge",
        script="""
        U: certbot renew fails for shop.example.com: Timeout during connect (likely firewall problem)
        $ sudo certbot renew --dry-run 2>&1 | grep -A2 "Detail"
        >   Detail: 203.0.113.40: Fetching http://shop.example.com/.well-known/acme-challenge/Vf1c...: Timeout during connect (likely firewall problem)
        A: The http-01 challenge needs port 80 reachable from the internet. Last month's hardening closed 80 in the security group (only 443 open).
        $ aws ec2 describe-security-groups --group-ids sg-0a12 --query "SecurityGroups[0].IpPermissions[].FromPort"
        > [443]
        A: Options: reopen 80 (nginx just redirects to https and serves the challenge), or switch to the dns-01 challenge via Route 53 so no inbound port is needed. I switched to dns-01 with the certbot-dns-route53 plugin, the certificate renewed, and expiry alerts stay on.
        """,
        exact="Timeout during connect (likely firewall problem) acme-challenge",
        paraphrase="TLS automatic refresh failed after lockdown blocked unencrypted traffic for domain validation",
        mixed="certbot: TLS automatic refresh failed after lockdown blocked unencrypted traffic",
        distractor="""
        U: certbot renewed the certificate but browsers still show the old expiry date
        A: nginx was never reloaded after renewal, so it still serves the old certificate from memory. Added `--deploy-hook "systemctl reload nginx"`.
        A: The ACME challenge itself succeeded; no firewall involved.
        """,
    ),
    Incident(
        key="oauth-redirect-uri-mismatch",
        cwd="/home/lee/projects/newsletter",
        script="""
        U: "Sign in with Google" broke after we moved to newsletter.acme.io: Error 400: redirect_uri_mismatch
        $ curl -s -o /dev/null -w "%{redirect_url}\\n" https://newsletter.acme.io/login/google
        > https://accounts.google.com/o/oauth2/v2/auth?client_id=8812...&redirect_uri=http%3A%2F%2Fnewsletter.acme.io%2Fauth%2Fcallback&response_type=code
        A: Two problems: the redirect_uri is `http://` because the app runs behind the load balancer and builds URLs from the plain-HTTP request, and the new domain is not in the OAuth client's authorized redirect URIs.
        ~ newsletter/app.py
        > +app.wsgi_app = ProxyFix(app.wsgi_app, x_proto=1, x_host=1)
        A: ProxyFix trusts X-Forwarded-Proto from the load balancer, so url_for generates https. And I added https://newsletter.acme.io/auth/callback in the Google Cloud console.
        """,
        exact="Error 400: redirect_uri_mismatch",
        paraphrase="federated SSO through a big search company failed after rehosting; return address insecure and unregistered",
        mixed="redirect_uri_mismatch: federated SSO failed after rehosting",
        distractor="""
        U: Google login works but we get "invalid_client" in staging
        A: Staging uses the production client id with the staging secret; the env file mixed them. Each environment has its own OAuth client.
        A: The redirect URI was fine; the credentials were mismatched.
        """,
    ),
    Incident(
        key="oauth-pkce-verifier-mismatch",
        cwd="/home/tom/work/booking-web",
        script="""
        U: login with our IdP fails after the redirect back: {"error":"invalid_grant","error_description":"PKCE verification failed: code_verifier does not match code_challenge"}
        @ src/auth/pkce.ts
        > const verifier = generateVerifier();
        > export async function startLogin() {
        >   const challenge = await sha256Base64Url(verifier);
        >   location.assign(authorizeUrl(challenge));
        > }
        > export async function finishLogin(code: string) {
        >   return tokenRequest(code, verifier);
        > }
        A: `verifier` is a module-level value, regenerated on every page load. The redirect back to /callback is a new page load, so finishLogin sends a different verifier than the one whose hash went to the authorize endpoint.
        ~ src/auth/pkce.ts
        > -const verifier = generateVerifier();
        > +  const verifier = generateVerifier();
        > +  sessionStorage.setItem("pkce_verifier", verifier);
        A: finishLogin reads it from sessionStorage (and removes it). Login round-trips correctly now.
        """,
        exact="PKCE verification failed: code_verifier does not match code_challenge",
        paraphrase="SPA sign-in breaks upon arrival from the provider since the proof secret changes between visits",
        mixed="code_verifier: SPA sign-in breaks upon arrival, proof secret changes between visits",
    ),
    Incident(
        key="jwt-jwks-key-rotation",
        cwd="/home/tom/work/orders-api",
        script="""
        U: since this morning all API calls get 401 with JsonWebTokenError: invalid signature, the IdP rotated keys last night
        @ src/auth/verify.ts
        > const publicKey = await fetchJwks().then((jwks) => jwks.keys[0]);
        > export const verify = (token: string) => jwt.verify(token, toPem(publicKey), { algorithms: ["RS256"] });
        A: The API loads the first JWKS key once at startup and ignores the token's `kid`. After rotation, tokens are signed with the new key (a different kid) and verification against the cached old key fails.
        ~ src/auth/verify.ts
        > -const publicKey = await fetchJwks().then((jwks) => jwks.keys[0]);
        > +const client = jwksClient({ jwksUri: JWKS_URL, cache: true, cacheMaxAge: 10 * 60_000, rateLimit: true });
        > +const getKey: GetPublicKeyOrSecret = (header, cb) =>
        > +  client.getSigningKey(header.kid, (err, key) => cb(err, key?.getPublicKey()));
        A: jwks-rsa selects the key by kid and refetches the JWKS when an unknown kid appears, so future rotations are seamless.
        """,
        exact="JsonWebTokenError: invalid signature jwks.keys[0]",
        paraphrase="all requests rejected as unauthorized after the identity provider switched cryptographic material overnight",
        mixed="JWKS: all requests rejected as unauthorized after cryptographic material switched overnight",
    ),
    Incident(
        key="saml-clock-skew",
        cwd="/home/omar/work/sso-bridge",
        script="""
        U: SAML login fails for some users with "SAML Response is not valid yet: NotBefore condition not satisfied"
        $ chronyc tracking | grep "System time"
        > System time     : 94.120337 seconds slow of NTP time
        A: This server's clock is 94 s behind. The IdP stamps the assertion's NotBefore with its own current time, so for our server the assertion appears to be from the future.
        $ sudo systemctl enable --now chronyd && sudo chronyc makestep
        > 200 OK
        A: chronyd was disabled on this VM image. Clock is synced now. I also set `allowed_clock_drift: 30` in the SAML settings, a common tolerance, so a few seconds of drift cannot lock people out.
        """,
        exact="NotBefore condition not satisfied",
        paraphrase="enterprise federated sign-in rejected as premature because one machine's hour hand is off",
        mixed="NotBefore: enterprise federated sign-in rejected as premature",
    ),
    Incident(
        key="s3-presigned-signature-mismatch",
        cwd="/home/maya/src/photo-site",
        script="""
        U: presigned upload URLs fail with 403 SignatureDoesNotMatch: The request signature we calculated does not match the signature you provided
        $ aws s3api get-bucket-location --bucket photos-eu-prod
        > { "LocationConstraint": "eu-central-1" }
        A: The bucket is in eu-central-1 but the boto3 client that presigns has no region configured, so it signs for us-east-1 with the global endpoint; the redirect to the regional endpoint then fails the SigV4 check. Also the browser sends `Content-Type: image/jpeg` which was not part of the signed request.
        ~ photos/storage.py
        > -s3 = boto3.client("s3")
        > +s3 = boto3.client("s3", region_name="eu-central-1", config=Config(signature_version="s3v4"))
        > -    url = s3.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": key}, ExpiresIn=600)
        > +    url = s3.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": key, "ContentType": content_type}, ExpiresIn=600)
        A: Uploads from the browser succeed now.
        """,
        exact="SignatureDoesNotMatch generate_presigned_url",
        paraphrase="direct picture transfers into cloud blob containers are forbidden because of the wrong zone and a missing MIME header",
        mixed="eu-central-1: direct picture transfers into cloud blob containers are forbidden",
    ),
    Incident(
        key="lambda-vpc-cold-start-timeout",
        cwd="/home/sam/infra/lambdas",
        script="""
        U: the thumbnail Lambda sometimes fails with Task timed out after 3.00 seconds, mostly the first call after a while
        $ aws logs filter-log-events --log-group-name /aws/lambda/thumbnailer --filter-pattern "REPORT" --limit 3 | jq -r '.events[].message' | grep -o "Init Duration: [0-9.]* ms"
        > Init Duration: 2411.87 ms
        A: Cold starts spend 2.4 s in init: the handler module imports Pillow, boto3 and opens a Postgres connection at import time to fetch settings, and the default 3 s timeout leaves almost nothing for the work.
        ~ thumbnailer/handler.py
        > -settings = load_settings_from_db()
        > +@functools.cache
        > +def settings():
        > +    return json.loads(os.environ["THUMB_SETTINGS"])
        A: Settings come from an environment variable now (no DB at init), and the timeout is 15 s. Init is 380 ms.
        """,
        exact="Task timed out after 3.00 seconds Init Duration",
        paraphrase="serverless resizer exceeds its deadline on chilly invocations since bootstrapping eats most of the allowance",
        mixed="thumbnailer: serverless resizer exceeds its deadline on chilly invocations",
    ),
    Incident(
        key="cdn-cached-set-cookie",
        cwd="/home/ana/src/storefront",
        script="""
        U: URGENT a customer saw another customer's cart and name after login
        $ curl -sI https://shop.example.com/api/me -H "Cookie: sid=abc" | grep -iE "cf-cache-status|cache-control|set-cookie"
        > cf-cache-status: HIT
        > cache-control: public, max-age=60
        A: Cloudflare cached /api/me: a page rule "Cache Everything" on shop.example.com/* was added for the landing pages, and the API answered with `public, max-age=60`, so the first user's personalised response was served to everyone for a minute.
        $ curl -s -X POST "https://api.cloudflare.com/client/v4/zones/$ZONE/purge_cache" -H "Authorization: Bearer $CF_TOKEN" -d '{"prefixes":["shop.example.com/api/"]}' | jq .success
        > true
        A: Purged, bypass rule added for /api/*, and the API now sends `Cache-Control: private, no-store` on every authenticated response. Sessions of affected users were revoked.
        """,
        exact="cf-cache-status: HIT cache-control: public, max-age=60",
        paraphrase="buyers viewed somebody else's basket because the CDN kept an individualized reply and handed it out broadly",
        mixed="Cloudflare: buyers viewed somebody else's basket, individualized reply handed out broadly",
        distractor="""
        U: after deploying, the landing page still shows yesterday's banner for some users
        A: The Cloudflare cache TTL for HTML is 4 hours. The deploy pipeline now purges the landing page URLs after a release.
        A: Stale public content, not a leak of private data.
        """,
    ),
    Incident(
        key="systemd-start-limit",
        cwd="/home/sam/infra/edge",
        script="""
        U: the metrics-agent service is dead after the config push: "Start request repeated too quickly"
        $ systemctl status metrics-agent --no-pager | sed -n '1,6p'; journalctl -u metrics-agent -n 3 --no-pager
        > × metrics-agent.service - metrics agent
        >      Active: failed (Result: start-limit-hit) since Fri 2026-03-13 08:12:40 UTC
        > metrics-agent[9011]: error: invalid value "15 s" for scrape_interval: expected a duration like 15s
        A: The new config has a typo (`15 s`), the agent exits immediately, systemd restarts it 5 times within 10 s (StartLimitBurst) and then gives up.
        $ sudo sed -i 's/scrape_interval: 15 s/scrape_interval: 15s/' /etc/metrics-agent/config.yml && sudo systemctl reset-failed metrics-agent && sudo systemctl start metrics-agent && systemctl is-active metrics-agent
        > active
        A: The config push now runs `metrics-agent --check-config` before restarting, and `RestartSec=5` keeps a crash loop from exhausting the limit in seconds.
        """,
        exact="Start request repeated too quickly start-limit-hit",
        paraphrase="boot manager gave up relaunching the telemetry collector after a misspelled setting killed it instantly over and over",
        mixed="StartLimitBurst: boot manager gave up relaunching the telemetry collector",
    ),
    Incident(
        key="cron-path-command-not-found",
        cwd="/home/lee/projects/backup-tool",
        script="""
        U: the nightly backup works when I run it by hand but cron mails me: /home/lee/bin/backup.sh: line 9: restic: command not found
        $ crontab -l; which restic
        > 15 2 * * * /home/lee/bin/backup.sh
        > /home/linuxbrew/.linuxbrew/bin/restic
        A: cron runs jobs with a minimal environment, PATH=/usr/bin:/bin, and does not read your shell profile, where Homebrew's bin directory is added.
        ~ /home/lee/bin/backup.sh
        >  #!/usr/bin/env bash
        > +export PATH="/home/linuxbrew/.linuxbrew/bin:$PATH"
        > +set -euo pipefail
        A: With `set -euo pipefail` a failed step stops the script and cron reports it, instead of a silent half backup.
        """,
        exact="restic: command not found",
        paraphrase="scheduled overnight archiving goes fine manually but not unattended since the binary's folder isn't in the lookup list",
        mixed="restic: overnight archiving goes fine manually but not unattended",
    ),
    Incident(
        key="docker-disk-full-overlay2",
        cwd="/home/sam/infra/edge",
        script="""
        U: deploys on the build host fail: write /var/lib/docker/tmp/GetImageBlob1234: no space left on device
        $ df -h /var/lib/docker && sudo du -sh /var/lib/docker/{overlay2,containers} 2>/dev/null
        > /dev/nvme0n1p1  100G  100G     0 100% /
        > 71G	/var/lib/docker/overlay2
        > 22G	/var/lib/docker/containers
        A: 71 GB of old image layers from months of builds, and 22 GB of container logs: the json-file log driver has no size limit by default.
        $ docker system prune -af --filter "until=168h" | tail -1
        > Total reclaimed space: 64.3GB
        ~ /etc/docker/daemon.json
        > +{ "log-driver": "json-file", "log-opts": { "max-size": "50m", "max-file": "3" } }
        A: A weekly prune runs from a systemd timer now, and new containers keep at most 150 MB of logs each.
        """,
        exact="no space left on device /var/lib/docker/overlay2",
        paraphrase="CI machine storage filled up completely with stale artifacts and unbounded output",
        mixed="overlay2: CI machine storage filled up completely with stale artifacts",
        distractor="""
        U: the build host says no space left on device but df shows 40% free
        $ df -i / | tail -1
        > /dev/nvme0n1p1 6553600 6553600 0 100% /
        A: Inodes are exhausted: millions of tiny files in /tmp/pip-cache from an old job. Deleting them freed the inodes.
        A: Disk blocks were fine; Docker images were not the problem.
        """,
    ),
    Incident(
        key="ssh-key-permissions-ci",
        cwd="/home/tom/work/orders-api",
        script="""
        U: the deploy job fails at the ssh step: WARNING: UNPROTECTED PRIVATE KEY FILE! Permissions 0644 for '/home/runner/.ssh/id_ed25519' are too open. This private key will be ignored.
        @ .github/workflows/deploy.yml
        >       - run: |
        >           mkdir -p ~/.ssh
        >           echo "${{ secrets.DEPLOY_KEY }}" > ~/.ssh/id_ed25519
        >           ssh deploy@web-1 ./release.sh
        A: OpenSSH refuses private keys readable by others. The file gets the runner's default umask (0644).
        ~ .github/workflows/deploy.yml
        >            echo "${{ secrets.DEPLOY_KEY }}" > ~/.ssh/id_ed25519
        > +          chmod 600 ~/.ssh/id_ed25519
        > +          ssh-keyscan -H web-1 >> ~/.ssh/known_hosts
        A: ssh-keyscan avoids the host key prompt; better still, the known host key should be stored as a secret rather than trusted on first use. Deploy passes.
        """,
        exact="UNPROTECTED PRIVATE KEY FILE! Permissions 0644",
        paraphrase="shipping pipeline can't authenticate to production servers since the keyfile mode is too lax",
        mixed="id_ed25519: shipping pipeline can't authenticate since the keyfile mode is too lax",
    ),
    Incident(
        key="git-lfs-pointer-files-ci",
        cwd="/home/kai/code/geo-wasm",
        script="""
        U: tests that load the fixture tiles fail only in CI: "invalid GeoTIFF: bad magic number", the same files work locally
        $ head -c 120 tests/fixtures/dem_alps.tif
        > version https://git-lfs.github.com/spec/v1
        > oid sha256:4be1c9f0...
        > size 18821231
        A: In CI the fixture is the Git LFS pointer text, not the binary: actions/checkout does not fetch LFS objects unless asked.
        ~ .github/workflows/ci.yml
        >        - uses: actions/checkout@v4
        > +        with:
        > +          lfs: true
        A: And since LFS bandwidth on the org is limited, the workflow caches .git/lfs keyed on the `git lfs ls-files -l` output.
        """,
        exact="bad magic number version https://git-lfs.github.com/spec/v1",
        paraphrase="elevation samples unreadable on the hosted runner since large assets arrive only as placeholders",
        mixed="LFS: elevation samples unreadable since large assets arrive only as placeholders",
    ),
    Incident(
        key="prometheus-label-cardinality",
        cwd="/home/ravi/go/src/github.com/acme/search-api",
        script="""
        U: Prometheus is using 28 GB RAM and keeps getting OOM killed since yesterday's search-api release
        $ curl -s localhost:9090/api/v1/status/tsdb | jq '.data.seriesCountByMetricName[:2]'
        > [{"name":"search_request_duration_seconds_bucket","value":4182210},{"name":"up","value":211}]
        A: 4.2M series for one histogram. The release added a `query` label with the raw search string: every distinct query creates 12 new bucket series.
        ~ metrics.go
        > -    requestDuration = promauto.NewHistogramVec(opts, []string{"route", "status", "query"})
        > +    requestDuration = promauto.NewHistogramVec(opts, []string{"route", "status"})
        A: Unbounded values (queries, user ids, URLs) must never be labels; query text belongs in logs or traces. I also set `sample_limit: 50000` on the scrape job as a safety net.
        """,
        exact="search_request_duration_seconds_bucket 4182210",
        paraphrase="telemetry store exhausts memory because latency timings were tagged with every unique lookup phrase",
        mixed="Prometheus exhausts memory, latency timings tagged with every unique lookup phrase",
    ),
)
