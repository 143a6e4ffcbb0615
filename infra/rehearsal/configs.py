"""The two configurations the rehearsal creates, and the deploy settings of
samconfig.toml (the file the README's `sam deploy` uses)."""

import tomllib

GUIDED_REGION = "us-east-1"
# Not us-east-1: the custom domain's certificate must still come from there.
FULL_REGION = "eu-west-1"


def samconfig(path):
    """stack_name, capabilities and region as `sam deploy` reads them from
    samconfig.toml (deploy's own table over the global one)."""
    with open(path, "rb") as f:
        conf = tomllib.load(f)
    env = conf.get("default", {})
    merged = dict(env.get("global", {}).get("parameters", {}))
    merged.update(env.get("deploy", {}).get("parameters", {}))
    if "stack_name" not in merged:
        raise SystemExit(f"{path}: no stack_name in [default.deploy.parameters] or [default.global.parameters]")
    caps = merged.get("capabilities", [])
    caps = caps.split() if isinstance(caps, str) else list(caps)
    overrides = merged.get("parameter_overrides", "")
    if overrides:
        raise SystemExit(f"{path}: parameter_overrides is set; a first-time guided deploy has the template's defaults")
    return {"stack_name": merged["stack_name"], "capabilities": caps, "region": merged.get("region")}


def guided(clients, region, archive_key):
    """A first `sam deploy --guided` as the README walks it: the archive
    signing key made first (`infra/archive-key new --stack STACK --slot A`,
    its private key in SSM), its public key pasted at the
    ArchiveSigningPublicKeyA prompt, every other prompt answered with Enter
    (the template's defaults: ArchiveDelivery cloudfront, slot A)."""
    return {"ArchiveSigningPublicKeyA": archive_key("A", secrets_manager=False)}


def full(clients, region, archive_key):
    """Every optional feature on: sign-in (its client secret in Secrets
    Manager, made first as a user would), the CI exchange, the cache's
    connect allowance, a custom domain with its us-east-1 certificate and
    hosted zone (made first, as a user has them); archives from the edge in
    the middle of a rotation: keys in both slots (in Secrets Manager), slot B
    signing, so the key group holds both."""
    secret = clients("secretsmanager").create_secret(
        Name="tfreg/oidc-client-secret", SecretString="rehearsal-client-secret"
    )["ARN"]
    cert = clients("acm", "us-east-1").request_certificate(DomainName="registry.example.com")["CertificateArn"]
    zone = _hosted_zone(clients("route53"), "example.com")
    return {
        "OidcIssuer": "https://login.example.com/realms/acme",
        "OidcClientId": "tfreg",
        "OidcClientSecretArn": secret,
        "OidcDisplayName": "Acme SSO",
        "CiIssuers": "https://token.actions.githubusercontent.com,https://gitlab.com",
        "CiAudience": "https://registry.example.com",
        "CiTokenTtl": "30m",
        "CiMaxTokenLifetime": "3h",
        "UpstreamConnectAllow": "10.0.0.0/8, fd00::/8",
        "DomainName": "registry.example.com",
        "CertificateArn": cert,
        "HostedZoneId": zone,
        "ArchiveSigningKeyStore": "secretsmanager",
        "ArchiveSigningPublicKeyA": archive_key("A", secrets_manager=True),
        "ArchiveSigningPublicKeyB": archive_key("B", secrets_manager=True),
        "ArchiveSigningKeySlot": "B",
        "AlarmEmail": "registry-ops@example.com",
    }


def _hosted_zone(route53, name):
    """A hosted zone whose id looks like Route 53's (Z...: the template's
    pattern); moto's ids are random letters, so it makes zones until one does."""
    for attempt in range(1000):
        made = route53.create_hosted_zone(Name=name, CallerReference=f"rehearsal-{attempt}")
        zone = made["HostedZone"]["Id"].rsplit("/", 1)[-1]
        if zone.startswith("Z"):
            return zone
        route53.delete_hosted_zone(Id=zone)
    raise SystemExit("moto made no hosted zone id starting with Z")


def full_ssm(clients, region, archive_key):
    """`full` with the client secret in SSM Parameter Store instead, and
    archives handed out as before issue 37 (ArchiveDelivery presigned: the
    blob function's presigned S3 redirects, no key, no key group)."""
    params = full(clients, region, lambda slot, secrets_manager: "")
    for k in ("ArchiveSigningKeyStore", "ArchiveSigningPublicKeyA", "ArchiveSigningPublicKeyB",
              "ArchiveSigningKeySlot"):
        del params[k]
    params["ArchiveDelivery"] = "presigned"
    del params["OidcClientSecretArn"]
    name = "/tfreg/oidc-client-secret"
    clients("ssm").put_parameter(Name=name, Value="rehearsal-client-secret", Type="SecureString")
    params["OidcClientSecretParameter"] = name
    return params


CONFIGS = {
    "guided": (guided, GUIDED_REGION),
    "full": (full, FULL_REGION),
    "full-ssm": (full_ssm, FULL_REGION),
}
