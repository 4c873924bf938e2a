"""Labelled secrets for the redaction tests: real-looking, invalid values of every kind the detector
names, each in the places transcripts put them (an env line, JSON, a curl command, prose), and texts
from ordinary transcripts that hold none (git hashes, UUIDs, base64, minified code, lockfiles)."""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from dataclasses import dataclass

UP, LOW, DIG = string.ascii_uppercase, string.ascii_lowercase, string.digits
ALNUM = UP + LOW + DIG


@dataclass(frozen=True)
class Sample:
    kind: str
    secret: str  # the characters that must not survive
    text: str  # a transcript text holding it


def _r(rnd: random.Random, alphabet: str, n: int) -> str:
    # Digits and both cases in every generated value (as real keys have), so each looks random.
    while True:
        v = "".join(rnd.choice(alphabet) for _ in range(n))
        if (set(alphabet) & set(DIG) and not any(c.isdigit() for c in v)) or (
                set(alphabet) & set(LOW) and set(alphabet) & set(UP) and (v.islower() or v.isupper())):
            continue
        return v


def _pem(rnd: random.Random, kind: str = "RSA ") -> str:
    body = base64.b64encode(rnd.randbytes(48 * 8)).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return f"-----BEGIN {kind}PRIVATE KEY-----\n" + "\n".join(lines) + f"\n-----END {kind}PRIVATE KEY-----"


def _jwt(rnd: random.Random) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    sig = base64.urlsafe_b64encode(rnd.randbytes(32)).decode().rstrip("=")
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': _r(rnd, DIG, 8), 'iat': 1700000000})}.{sig}"


def values(rnd: random.Random) -> dict[str, list[str]]:
    """Five or more secrets of every kind."""
    out: dict[str, list[str]] = {}
    for _ in range(6):
        add = out.setdefault
        add("aws-access-key", []).append(rnd.choice(["AKIA", "ASIA"]) + _r(rnd, UP + "234567", 16))
        add("aws-secret-key", []).append(_r(rnd, ALNUM + "/+", 40))
        add("github-token", []).append(rnd.choice(["ghp_", "gho_", "ghs_"]) + _r(rnd, ALNUM, 36))
        add("github-fine-grained-token", []).append("github_pat_" + _r(rnd, ALNUM, 22) + "_" + _r(rnd, ALNUM, 59))
        add("gitlab-token", []).append("glpat-" + _r(rnd, ALNUM + "_-", 20))
        add("slack-token", []).append(f"xoxb-{_r(rnd, DIG, 12)}-{_r(rnd, DIG, 13)}-{_r(rnd, ALNUM, 24)}")
        add("slack-webhook", []).append(
            f"https://hooks.slack.com/services/T{_r(rnd, UP + DIG, 8)}/B{_r(rnd, UP + DIG, 10)}/{_r(rnd, ALNUM, 24)}")
        add("stripe-key", []).append(rnd.choice(["sk_live_", "rk_live_", "sk_test_"]) + _r(rnd, ALNUM, 24))
        add("openai-key", []).append(rnd.choice(["sk-proj-" + _r(rnd, ALNUM + "_-", 48),
                                                 "sk-" + _r(rnd, ALNUM, 20) + "T3BlbkFJ" + _r(rnd, ALNUM, 20),
                                                 "sk-svcacct-" + _r(rnd, ALNUM, 40)]))
        add("anthropic-key", []).append("sk-ant-api03-" + _r(rnd, ALNUM + "_-", 93) + "AA")
        add("huggingface-token", []).append("hf_" + _r(rnd, UP + LOW, 34))
        add("npm-token", []).append("npm_" + _r(rnd, ALNUM, 36))
        add("pypi-token", []).append("pypi-AgEIcHlwaS5vcmc" + _r(rnd, ALNUM + "_-", 60))
        add("twilio-key", []).append("SK" + _r(rnd, "0123456789abcdef", 32))
        add("sendgrid-key", []).append(f"SG.{_r(rnd, ALNUM + '_-', 22)}.{_r(rnd, ALNUM + '_-', 43)}")
        add("gcp-api-key", []).append("AIza" + _r(rnd, ALNUM + "_-", 35))
        add("gcp-oauth-secret", []).append("GOCSPX-" + _r(rnd, ALNUM + "_-", 28))
        add("azure-client-secret", []).append(
            _r(rnd, ALNUM, 3) + str(rnd.randint(0, 9)) + "Q~" + _r(rnd, ALNUM + "_.~-", 34))
        add("azure-storage-key", []).append(base64.b64encode(rnd.randbytes(64)).decode())
        add("jwt", []).append(_jwt(rnd))
        add("url-password", []).append(_r(rnd, ALNUM, 14) + "!")
        add("bearer-token", []).append(_r(rnd, ALNUM + "-._~", 40))
        add("secret-assignment", []).append(_r(rnd, ALNUM, 24))
        add("basic-auth", []).append(base64.b64encode(f"deploy:{_r(rnd, ALNUM, 16)}".encode()).decode())
        add("private-key", []).append(_pem(rnd, rnd.choice(["RSA ", "EC ", "OPENSSH ", ""])))
    return out


def samples(seed: int = 7) -> list[Sample]:
    """Every value of ``values`` in a transcript-shaped text of its kind."""
    rnd = random.Random(seed)
    out: list[Sample] = []
    for kind, vals in values(rnd).items():
        for i, v in enumerate(vals):
            if kind == "aws-secret-key":
                text = f"export AWS_SECRET_ACCESS_KEY={v}" if i % 2 else f'aws_secret_access_key = "{v}"'
            elif kind == "azure-storage-key":
                text = (f"DefaultEndpointsProtocol=https;AccountName=devstore;AccountKey={v};"
                        "EndpointSuffix=core.windows.net")
            elif kind == "url-password":
                scheme = ["postgres", "mysql", "redis", "amqp", "mongodb+srv", "https"][i]
                text = f"DATABASE_URL={scheme}://app_user:{v}@db.internal:5432/app"
            elif kind == "bearer-token":
                text = (f'curl -H "Authorization: Bearer {v}" https://api.example.com/v1/items' if i % 2
                        else f'{{"headers": {{"authorization": "Bearer {v}"}}}}')
            elif kind == "basic-auth":
                text = (f"curl -H 'Authorization: Basic {v}' https://ci.example.com/api" if i % 2
                        else f'{{"Authorization": "Basic {v}"}}')
            elif kind == "secret-assignment":
                key = ["API_KEY", "DB_PASSWORD", "client_secret", "SESSION_SECRET", "apiKey", "auth_token"][i]
                text = [f"{key}={v}", f'  "{key}": "{v}",', f"{key}: {v}", f"export {key}='{v}'",
                        f'{key} = "{v}"', f"{key}={v}  # from the vault"][i]
            elif kind == "private-key":
                text = (f"cat ~/.ssh/id\n{v}\n" if i % 2 else
                        json.dumps({"type": "service_account", "private_key_id": "x", "private_key": v + "\n"}))
            elif kind == "jwt":
                text = f"the session cookie was token={v}; path=/" if i % 2 else f"decoded {v} and it expired"
            else:
                text = [f"export TOKEN={v}", f'{{"key": "{v}"}}', f"here is my key {v} please use it",
                        f"config.set('{v}')", f"Using {v} for the deploy", f"`{v}`"][i]
            out.append(Sample(kind, v, text))
    return out


def clean_texts(seed: int = 11) -> list[str]:
    """Texts of ordinary transcripts that hold no secret."""
    rnd = random.Random(seed)
    out: list[str] = []
    for _ in range(40):
        out.append(f"commit {rnd.randbytes(20).hex()} Author: dev <dev@example.com> fixed the build")
        out.append(f"session {uuid.UUID(bytes=rnd.randbytes(16))} resumed; request id {uuid.uuid4()}")
        out.append("data:image/png;base64," + base64.b64encode(rnd.randbytes(300)).decode())
        out.append(f'"integrity": "sha512-{base64.b64encode(rnd.randbytes(64)).decode()}",')
        out.append(f'"resolved": "https://registry.npmjs.org/lodash/-/lodash-4.17.{rnd.randint(1, 21)}.tgz",')
    out += [
        "!function(e,t){\"object\"==typeof exports?module.exports=t():e.lib=t()}(this,function(){var n=0;"
        "return function(r){return r+n++}});",
        "const token = tokenizer.next(); if (token.kind === 'eof') return;",
        "password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())",
        "max_tokens=4096, temperature=0.2, api_key=os.environ['OPENAI_API_KEY']",
        "export API_KEY=${API_KEY:?set it first}",
        'DB_PASSWORD: "changeme"',
        "the token budget is 200000 tokens and the secret sauce is caching",
        "Authorization: Bearer $TOKEN",
        "postgres://user@localhost/db and postgres://localhost:5432/db",
        "see https://github.com/org/repo/pull/1234 and sk-learn docs",
        "SECRET_KEY = get_random_secret_key()",
        "aws s3 cp s3://bucket/key . --profile dev",
        "github_pat_ tokens start with that prefix",
        "pyproject.toml: requires = [\"setuptools>=61\", \"wheel\"]",
        "poetry.lock: content-hash = \"" + rnd.randbytes(32).hex() + "\"",
        "the key=value pairs in the config are read at start-up",
        "I set PASSWORD_MIN_LENGTH=12 in settings.py",
        "client_secret=client_secret_from_env",
        "accessKey: this.props.accessKey",
    ]
    return out
