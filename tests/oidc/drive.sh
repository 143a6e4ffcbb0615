#!/usr/bin/env bash
# Proves the OpenID Provider fixture (tests/oidc/provider.mjs) end to end with
# curl and a cookie jar: authorization code + PKCE S256 + nonce for a test
# user, the code exchanged by the confidential client, the ID token's claims
# printed; then the failures a registry relies on (a wrong verifier, a code
# used twice, an unknown user), a key rotation seen in a second sign-in, and a
# token minted by /_test/sign.
#
#   tests/oidc/drive.sh            over HTTP
#   tests/oidc/drive.sh --https    over HTTPS (a throw-away self-signed
#                                  certificate made with openssl)
#
# Needs node (the fixture), curl and coreutils; .ci/install-tools first.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TOOLS="${TFREG_TOOLS_DIR:-$ROOT/.tools}"
export TFREG_OIDC_PROVIDER="${TFREG_OIDC_PROVIDER:-$TOOLS/npm/node_modules/oidc-provider}"
WORK="$(mktemp -d)"
PROVIDER_PID=
cleanup() {
    [ -z "$PROVIDER_PID" ] || kill "$PROVIDER_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

die() { printf 'drive: %s\n' "$*" >&2; exit 1; }
step() { printf '\n== %s\n' "$*"; }

CURL=(curl -sS --max-time 10)
TLS_JSON=
if [ "${1:-}" = --https ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
        -addext subjectAltName=IP:127.0.0.1 \
        -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
    CURL+=(--cacert "$WORK/cert.pem")
    TLS_JSON=", \"tls\": {\"cert\": \"$WORK/cert.pem\", \"key\": \"$WORK/key.pem\"}"
fi

CLIENT_ID=tfreg
CLIENT_SECRET=s3cret-for-tests
REDIRECT_URI=https://registry.example.test/oauth/callback

cat > "$WORK/config.json" <<EOF
{
  "listen": "127.0.0.1:0",
  "clients": [{"client_id": "$CLIENT_ID", "client_secret": "$CLIENT_SECRET",
               "redirect_uris": ["$REDIRECT_URI"]}],
  "users": [
    {"sub": "alice", "email": "alice@example.com", "name": "Alice Example",
     "groups": ["platform", "acme-publishers"]},
    {"sub": "bob", "email": "bob@example.com", "name": "Bob", "groups": ["other"],
     "password": "hunter2"}
  ]$TLS_JSON
}
EOF

# ---- start it and read its one line of JSON ------------------------------------
node "$ROOT/tests/oidc/provider.mjs" "$WORK/config.json" >"$WORK/ready" 2>"$WORK/provider.log" &
PROVIDER_PID=$!
for _ in $(seq 100); do
    [ -s "$WORK/ready" ] && break
    kill -0 "$PROVIDER_PID" 2>/dev/null || { cat "$WORK/provider.log" >&2; die "provider exited"; }
    sleep 0.1
done
READY="$(head -n1 "$WORK/ready")"
[ -n "$READY" ] || die "no ready line"
json_field() { sed -n "s/.*\"$1\":\"\\{0,1\\}\\([^\",}]*\\).*/\\1/p" <<<"$2"; }
ISSUER="$(json_field issuer "$READY")"
step "ready line"
echo "$READY"

b64url_decode() {
    local s="${1//-/+}"
    s="${s//_//}"
    while [ $((${#s} % 4)) != 0 ]; do s="$s="; done
    base64 -d <<<"$s"
}
random_b64url() { head -c "$1" /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '='; }
s256() {  # base64url(sha256(ascii)), with coreutils only
    local hex
    hex="$(printf '%s' "$1" | sha256sum | cut -d' ' -f1)"
    # shellcheck disable=SC2059
    printf "$(sed 's/../\\x&/g' <<<"$hex")" | base64 -w0 | tr '+/' '-_' | tr -d '='
}
# GET or POST without following; prints "<status> <absolute Location>".
hop() { "${CURL[@]}" -b "$JAR" -c "$JAR" -o "$WORK/body" -w '%{http_code} %{redirect_url}\n' "$@"; }
query_param() { sed -n "s/.*[?&]$1=\\([^&#]*\\).*/\\1/p" <<<"$2"; }

# Runs steps 1-5 of provider.mjs's header for USER; sets CODE, STATE, NONCE, VERIFIER.
sign_in() {
    local user="$1" password="$2" out url challenge
    VERIFIER="$(random_b64url 32)"
    challenge="$(s256 "$VERIFIER")"
    STATE="$(random_b64url 16)"
    NONCE="$(random_b64url 16)"
    out="$(hop -G "$ISSUER/auth" \
        --data-urlencode response_type=code --data-urlencode "client_id=$CLIENT_ID" \
        --data-urlencode "redirect_uri=$REDIRECT_URI" \
        --data-urlencode "scope=openid email profile groups" \
        --data-urlencode "state=$STATE" --data-urlencode "nonce=$NONCE" \
        --data-urlencode "code_challenge=$challenge" --data-urlencode code_challenge_method=S256)"
    echo "GET  /auth?...                    -> $out"
    url="${out#* }"
    while [[ "$url" != "$REDIRECT_URI"* ]]; do
        case "$url" in
        */interaction/*)
            # The page to a file first: `grep -q <(curl ...)` let the next hop read
            # the jar while this curl, cut off by grep's early exit, still wrote it
            # (seen as the OP's "interaction session id cookie not found" under load).
            "${CURL[@]}" -b "$JAR" -c "$JAR" -o "$WORK/page" "$url"
            if grep -q 'name="prompt" value="login"' "$WORK/page"; then
                out="$(hop "$url" --data-urlencode prompt=login --data-urlencode "login=$user" \
                    --data-urlencode "password=$password")"
                echo "POST ${url#"$ISSUER"} login=$user -> $out"
            else
                out="$(hop "$url" --data-urlencode prompt=consent)"
                echo "POST ${url#"$ISSUER"} prompt=consent -> $out"
            fi
            ;;
        "$ISSUER"/auth/*)
            out="$(hop "$url")"
            echo "GET  ${url#"$ISSUER"}     -> ${out%%\?*}?..."
            ;;
        *) cat "$WORK/body" >&2; die "unexpected: $out" ;;
        esac
        [ "${out%% *}" = 303 ] || { echo "     body: $(cat "$WORK/body")"; return 1; }
        url="${out#* }"
    done
    CODE="$(query_param code "$url")"
    [ "$(query_param state "$url")" = "$STATE" ] || die "state changed"
    echo "callback: code=${CODE:0:6}... state matches, iss=$(query_param iss "$url")"
}

token() {  # <code> <verifier>: the token endpoint's status and body
    "${CURL[@]}" -o "$WORK/token.json" -w '%{http_code}' -u "$CLIENT_ID:$CLIENT_SECRET" \
        --data-urlencode grant_type=authorization_code --data-urlencode "code=$1" \
        --data-urlencode "redirect_uri=$REDIRECT_URI" --data-urlencode "code_verifier=$2" \
        "$ISSUER/token"
}

show_id_token() {
    local id_token header claims
    id_token="$(json_field id_token "$(cat "$WORK/token.json")")"
    IFS=. read -r header claims _ <<<"$id_token"
    HEADER="$(b64url_decode "$header")"
    CLAIMS="$(b64url_decode "$claims")"
    echo "header: $HEADER"
    echo "claims: $CLAIMS"
    [[ "$CLAIMS" == *"\"nonce\":\"$NONCE\""* ]] || die "the ID token does not carry the nonce sent"
    [[ "$CLAIMS" == *'"groups":['*'"acme-publishers"'* ]] || die "the ID token has no groups"
}

# ---- the happy path -----------------------------------------------------------------
JAR="$WORK/jar"
step "alice signs in (code + PKCE S256 + nonce, login and consent forms)"
sign_in alice any-password
echo "sent nonce=$NONCE"
step "code -> tokens (client_secret_basic)"
status="$(token "$CODE" "$VERIFIER")"
echo "POST /token -> $status; fields: $(grep -o '"[a-z_]*":' "$WORK/token.json" | tr -d '":' | tr '\n' ' ')"
[ "$status" = 200 ] || { cat "$WORK/token.json"; die "token exchange failed"; }
show_id_token
step "the same code again -> refused"
status="$(token "$CODE" "$VERIFIER")"
echo "POST /token -> $status $(cat "$WORK/token.json")"
[ "$status" = 400 ] && grep -q invalid_grant "$WORK/token.json" || die "a used code was not refused"

step "a wrong code_verifier -> refused"
sign_in alice x >/dev/null
status="$(token "$CODE" "$(random_b64url 32)")"
echo "POST /token -> $status $(cat "$WORK/token.json")"
[ "$status" = 400 ] && grep -q invalid_grant "$WORK/token.json" || die "a wrong verifier was not refused"

step "an unknown user, and bob with a wrong password (fresh jar)"
JAR="$WORK/jar-mallory"
! sign_in mallory x || die "an unknown user signed in"
JAR="$WORK/jar-bob"
! sign_in bob wrong || die "a wrong password signed in"

step "rotate keys, then alice signs in again (same jar: no login form)"
echo "POST /_test/rotate -> $("${CURL[@]}" -X POST "$ISSUER/_test/rotate")"
JAR="$WORK/jar"
sign_in alice any-password
status="$(token "$CODE" "$VERIFIER")"
echo "POST /token -> $status"
[ "$status" = 200 ] || die "no token after the rotation"
show_id_token
[[ "$HEADER" == *'"kid":"rsa-2"'* ]] || die "the ID token is not signed by the new key"
echo "jwks kids: $("${CURL[@]}" "$ISSUER/jwks" | grep -o '"kid":"[^"]*"' | tr '\n' ' ')"

step "a GitHub-shaped CI token from /_test/sign (ES256)"
jwt="$("${CURL[@]}" -X POST -H 'content-type: application/json' "$ISSUER/_test/sign" \
    -d '{"alg": "ES256", "claims": {"aud": "https://registry.example.test", "sub": "repo:acme/vpc:ref:refs/heads/main", "repository": "acme/vpc", "repository_owner_id": "123", "ref_protected": "true"}}')"
IFS=. read -r h c _ <<<"$jwt"
echo "header: $(b64url_decode "$h")"
echo "claims: $(b64url_decode "$c")"
