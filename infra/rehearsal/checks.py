"""The rehearsal's checks of what moto made against what the template says:
types, parameters and rules, AWS quotas, every resource read back through
its service, every policy ARN, outputs, the functions as Lambda holds them."""

import fnmatch
import json
import re
import sys

from . import limits, template
from .cfn import CFN_TYPES
from .gapfill import GAP_TYPES
from .intrinsics import Unresolved
from .properties import FILLED_TYPES, Properties, PropertyError


def say(msg):
    print(f"rehearse: {msg}", file=sys.stderr, flush=True)


class Failed(SystemExit):
    """The rehearsal found something wrong: the message says what."""


def evaluated(resolver, node, what):
    try:
        return resolver.value(node)
    except Unresolved as e:
        raise Failed(f"{what}: {e} does not resolve")


def unresolved(value):
    text = json.dumps(value)
    return value in ("", None) or "${" in text or "None" in text or '"Fn::' in text or '"Ref"' in text


def check_types(transformed):
    """Every resource type in the template (whatever the conditions) is one
    moto's CloudFormation creates or one the gap filler creates."""
    unknown = sorted(
        f"{lid} ({r['Type']})" for lid, r in transformed["Resources"].items()
        if r["Type"] not in CFN_TYPES and r["Type"] not in GAP_TYPES
    )
    if unknown:
        raise Failed(
            "resource types neither moto's CloudFormation nor the gap filler creates "
            f"(add each to infra/rehearsal/cfn.py or gapfill.py, checked): {', '.join(unknown)}"
        )


def parameter_values(transformed, given):
    """All parameters as CloudFormation passes them (strings), checked against
    their constraints as CreateStack checks them."""
    values = {}
    for name, p in transformed.get("Parameters", {}).items():
        if name in given:
            v = str(given[name])
        elif "Default" in p:
            v = str(p["Default"])
        else:
            raise Failed(f"parameter {name} has no default and no value")
        if "AllowedValues" in p and v not in [str(a) for a in p["AllowedValues"]]:
            raise Failed(f"parameter {name}={v!r} is not one of {p['AllowedValues']}")
        if "AllowedPattern" in p and not re.fullmatch(p["AllowedPattern"], v):
            raise Failed(f"parameter {name}={v!r} does not match {p['AllowedPattern']}")
        if "MaxLength" in p and len(v) > int(p["MaxLength"]):
            raise Failed(f"parameter {name} is longer than {p['MaxLength']}")
        if p.get("Type") == "Number":
            n = float(v)
            if "MinValue" in p and n < float(p["MinValue"]) or "MaxValue" in p and n > float(p["MaxValue"]):
                raise Failed(f"parameter {name}={v} is out of range")
        values[name] = v
    unknown = set(given) - set(values)
    if unknown:
        raise Failed(f"parameters not in the template: {sorted(unknown)}")
    return values


def check_rules(transformed, resolver):
    """The template's Rules, as CreateStack checks them (moto does not)."""
    for name, rule in transformed.get("Rules", {}).items():
        if "RuleCondition" in rule and not resolver.value(rule["RuleCondition"]):
            continue
        for a in rule["Assertions"]:
            if not resolver.value(a["Assert"]):
                raise Failed(f"rule {name}: {a.get('AssertDescription', 'assertion fails')}")


def check_limits(resolver, active):
    """Every resource within the AWS quotas moto does not enforce (limits.py);
    the figures, for how close each is."""
    problems, figures = [], {}
    for lid, r in active.items():
        props = evaluated(resolver, r.get("Properties", {}), lid)
        problems += limits.resource_limits(lid, r["Type"], props)
        figure = limits.sizes(lid, r["Type"], props)
        if figure:
            figures[lid] = figure
    if problems:
        raise Failed("over AWS limits moto does not enforce: " + "; ".join(problems))
    return figures


def fill_properties(clients, resolver, resources, stack_ids, stand_in):
    """What moto's CloudFormation ignored, set and read back (properties.py)."""
    props = Properties(clients, stand_in)
    filled = []
    for lid in stack_ids:
        r = resources[lid]
        method = FILLED_TYPES.get(r["Type"])
        if method:
            values = evaluated(resolver, r.get("Properties", {}), lid)
            try:
                filled += [f"{lid}.{p}" for p in getattr(props, method)(resolver.refs[lid], values)]
            except PropertyError as e:
                raise Failed(f"{lid}: {e}")
    if props.unversioned:
        # IAM reads a policy without Version as 2008-10-17's language (no
        # policy variables); SAM adds none. The template names it in each.
        raise Failed("inline policies without Version \"2012-10-17\": " + ", ".join(props.unversioned))
    return {"set": filled, "not_held_by_moto": props.unheld, "policies_without_version": props.unversioned}


def verify(resolver, resources, stack_ids, stacked, fillers, records):
    """Every resource read back through its service API."""
    out = {}
    for lid in stack_ids:
        r = resources[lid]
        exists = CFN_TYPES[r["Type"]][0]
        props = evaluated(resolver, r.get("Properties", {}), lid)
        if not getattr(stacked, exists)(resolver.refs[lid], props):
            raise Failed(f"{lid} ({r['Type']}) is in the stack but its service does not know it")
        out[lid] = {"type": r["Type"], "physical": resolver.refs[lid], "by": "cloudformation", "props": props}
    for rec in records:
        if not getattr(fillers, f"exists_{GAP_TYPES[rec['type']]}")(rec["ref"], rec["info"]):
            raise Failed(f"{rec['logical_id']} ({rec['type']}): the gap filler made it but its service does not know it")
        out[rec["logical_id"]] = {"type": rec["type"], "physical": rec["ref"], "by": "gap_filler"}
    return out


def check_policy_resources(clients, resolver, resources, stack_ids, given):
    """Every Resource of every role's policy in the template names something that exists: an
    ARN of the stack's resources (or under one: a table's index, a bucket's
    objects), or one the configuration made (the client secret). A wrong ARN
    would be an AccessDenied first seen in AWS; moto checks only actions."""
    known = {v for (lid, attr), v in resolver.attrs.items() if attr == "Arn" and isinstance(v, str)}
    known |= {v for v in given.values() if isinstance(v, str) and v.startswith("arn:")}
    ssm = given.get("OidcClientSecretParameter")
    if ssm:
        known.add(clients("ssm").get_parameter(Name=ssm)["Parameter"]["ARN"])
    # The archive signing keys infra/archive-key made (the stack's prefix).
    stack = resolver.pseudo["AWS::StackName"]
    for p in clients("ssm").describe_parameters()["Parameters"]:
        if p["Name"].startswith(f"/{stack}/archive-signing-key-"):
            known.add(clients("ssm").get_parameter(Name=p["Name"])["Parameter"]["ARN"])
    for s in clients("secretsmanager").list_secrets()["SecretList"]:
        if s["Name"].startswith(f"{stack}/archive-signing-key-"):
            known.add(s["ARN"])
    seen = 0
    for lid in stack_ids:
        if resources[lid]["Type"] != "AWS::IAM::Role":
            continue
        for policy in evaluated(resolver, resources[lid]["Properties"].get("Policies", []), lid):
            doc = policy["PolicyDocument"]
            statements = doc["Statement"] if isinstance(doc["Statement"], list) else [doc["Statement"]]
            for st in statements:
                arns = st.get("Resource", [])
                for arn in [arns] if isinstance(arns, str) else arns:
                    seen += 1
                    if not (arn in known or any(arn.startswith(k + "/") for k in known)
                            or any(fnmatch.fnmatchcase(k, arn) for k in known)):
                        raise Failed(f"{lid} policy {policy['PolicyName']} statement {st.get('Sid', '?')}: "
                                     f"{arn} is no resource of the stack")
    return seen


def check_origins(fillers, outputs):
    """CloudFront's origin is the HTTP API's own endpoint (ApiEndpoint)."""
    api_host = outputs.get("ApiEndpoint", "").removeprefix("https://")
    for config in fillers.distributions.values():
        domains = [o["DomainName"] for o in config["Origins"]["Items"]]
        if api_host not in domains:
            raise Failed(f"the distribution's origins {domains} are not the API's endpoint {api_host}")


def check_outputs(cfn, stack_name, outputs, resolver):
    """Every output CloudFormation reports, concrete and equal to the
    rehearsal's own evaluation of its Value."""
    got = {o["OutputKey"]: o.get("OutputValue") for o in cfn.describe_stacks(StackName=stack_name)["Stacks"][0].get("Outputs", [])}
    missing = sorted(set(outputs) - set(got))
    if missing:
        raise Failed(f"outputs missing from the stack: {missing}")
    extra = sorted(set(got) - set(outputs))
    if extra:
        raise Failed(f"outputs whose conditions are false were reported: {extra}")
    for k, o in outputs.items():
        want = evaluated(resolver, o["Value"], f"output {k}")
        if unresolved(got[k]) or unresolved(want):
            raise Failed(f"output {k} does not resolve: {got[k]!r}")
        if str(want) != got[k]:
            raise Failed(f"output {k}: CloudFormation says {got[k]!r}, the template means {want!r}")
    return got


def functions(clients, resolver, source, resources, stack_ids):
    """Each function as Lambda holds it, its environment checked against the template."""
    lam = clients("lambda")
    binaries = {lid: b for lid, (_, b) in template.packages(source).items()}
    out = {}
    for lid in stack_ids:
        r = resources[lid]
        if r["Type"] != "AWS::Lambda::Function":
            continue
        conf = lam.get_function_configuration(FunctionName=resolver.refs[lid])
        # Lambda's variables are strings; moto keeps a Number parameter's int.
        env = as_strings(conf.get("Environment", {}).get("Variables", {}))
        want = as_strings(evaluated(resolver, r["Properties"].get("Environment", {}).get("Variables", {}),
                                    f"{lid} environment"))
        if env != want:
            diff = {k: (env.get(k), want.get(k)) for k in set(env) | set(want) if env.get(k) != want.get(k)}
            raise Failed(f"{lid}: environment (got, template) differs: {diff}")
        for k, v in env.items():
            if "${" in v or "None" in v:
                raise Failed(f"{lid}: {k}={v!r} does not resolve")
        role_arn = conf["Role"]
        props = evaluated(resolver, r["Properties"], lid)
        # What the role-scoped runs do first: the stand-in assumes the role.
        clients("sts").assume_role(RoleArn=role_arn, RoleSessionName=f"rehearsal-{lid}"[:64])
        out[lid] = {
            "name": conf["FunctionName"],
            "arn": conf["FunctionArn"],
            "binary": binaries[lid],
            "role_arn": role_arn,
            "role_name": role_arn.rsplit("/", 1)[1],
            "environment": env,
            "timeout": conf["Timeout"],
            "memory": conf["MemorySize"],
            # From the template: moto's Lambda keeps none of these (properties.py).
            "architectures": props.get("Architectures", ["x86_64"]),
            "ephemeral_storage_mb": int(props.get("EphemeralStorage", {}).get("Size", 512)),
            "log_group": props.get("LoggingConfig", {}).get("LogGroup"),
        }
    return out


def as_strings(variables):
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in variables.items()}




# Managed-CachingOptimized: archive keys are written once, never replaced.
CACHING_OPTIMIZED = "658327ea-f89d-4fab-a63d-7e88639e58f6"
ARCHIVE_PATHS = ["/archives/*", "/cache/*"]


def _of_type(resources, active, rtype):
    return sorted(lid for lid in active if resources[lid]["Type"] == rtype)


def check_archives(clients, resolver, resources, active, fillers, functions_made):
    """Archives from the edge (issue 37), read back: each public key in
    CloudFront equal to the template's and to the public half of the private
    key the signing functions are told to read (from SSM or Secrets Manager);
    the key group holding exactly the stack's keys; the origin access
    control; the distribution's bucket origin and its /archives/* and
    /cache/* behaviours (trusted key group, GET and HEAD, cached, headers
    policy); the bucket policy letting this distribution alone read those
    prefixes; each signing function's key settings. Presigned: none of it."""
    from cryptography.hazmat.primitives import serialization

    edge = resolver.condition("ArchivesFromEdge")
    account = resolver.pseudo["AWS::AccountId"]
    bucket = resolver.refs["Bucket"]
    cf, s3 = clients("cloudfront"), clients("s3")
    out = {"delivery": resolver.parameters["ArchiveDelivery"]}
    signers = {lid: f["environment"] for lid, f in functions_made.items()
               if "TFREG_ARCHIVE_DELIVERY" in f["environment"]}
    out["signers"] = sorted(signers)
    for lid, env in signers.items():
        if env["TFREG_ARCHIVE_DELIVERY"] != out["delivery"]:
            raise Failed(f"{lid}: TFREG_ARCHIVE_DELIVERY {env['TFREG_ARCHIVE_DELIVERY']!r}")
    [distribution] = _of_type(resources, active, "AWS::CloudFront::Distribution")
    dist_id = resolver.refs[distribution]
    config = cf.get_distribution_config(Id=dist_id)["DistributionConfig"]
    behaviours = {b["PathPattern"]: b for b in (config.get("CacheBehaviors") or {}).get("Items") or []}
    origins = {o["Id"]: o for o in config["Origins"]["Items"]}
    policy = json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"])
    statements = policy["Statement"] if isinstance(policy["Statement"], list) else [policy["Statement"]]
    out["bucket_policy"] = statements
    if s3.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"]["IsPublic"]:
        raise Failed(f"bucket {bucket}: its policy is public")
    allows = [st for st in statements if st["Effect"] == "Allow"]
    cloudfront_types = {"AWS::CloudFront::PublicKey", "AWS::CloudFront::KeyGroup",
                        "AWS::CloudFront::OriginAccessControl", "AWS::CloudFront::ResponseHeadersPolicy"}
    if not edge:
        made = [lid for lid in active if resources[lid]["Type"] in cloudfront_types]
        extra = [k for k in ("TFREG_ARCHIVE_URL", "TFREG_CLOUDFRONT_KEY_PAIR_ID", "TFREG_ARCHIVE_SIGNING_KEY")
                 if any(k in env for env in signers.values())]
        if made or allows or set(behaviours) & set(ARCHIVE_PATHS) or len(origins) != 1 or extra:
            raise Failed(f"ArchiveDelivery presigned, yet {made} {allows} {sorted(behaviours)} "
                         f"{sorted(origins)} {extra}")
        return out

    # The public keys, each as the template writes it.
    keys = {}
    for lid in _of_type(resources, active, "AWS::CloudFront::PublicKey"):
        got = cf.get_public_key(Id=resolver.refs[lid])["PublicKey"]["PublicKeyConfig"]
        want = evaluated(resolver, resources[lid]["Properties"], lid)["PublicKeyConfig"]
        if got["EncodedKey"] != want["EncodedKey"]:
            raise Failed(f"{lid}: CloudFront holds {got['EncodedKey']!r}, the template says {want['EncodedKey']!r}")
        key = serialization.load_pem_public_key(got["EncodedKey"].encode())
        if key.key_size != 2048:
            raise Failed(f"{lid}: an RSA key of {key.key_size} bits; CloudFront takes 2048")
        keys[lid] = resolver.refs[lid]
    out["public_keys"] = keys
    [group] = _of_type(resources, active, "AWS::CloudFront::KeyGroup")
    items = cf.get_key_group(Id=resolver.refs[group])["KeyGroup"]["KeyGroupConfig"]["Items"]
    if sorted(items) != sorted(keys.values()):
        raise Failed(f"{group}: holds {items}, the stack's public keys are {keys}")
    out["key_group"] = {"id": resolver.refs[group], "items": items}
    [oac] = _of_type(resources, active, "AWS::CloudFront::OriginAccessControl")
    got = cf.get_origin_access_control(Id=resolver.refs[oac])["OriginAccessControl"]["OriginAccessControlConfig"]
    if (got["OriginAccessControlOriginType"], got["SigningBehavior"], got["SigningProtocol"]) != ("s3", "always", "sigv4"):
        raise Failed(f"{oac}: {got}")
    out["origin_access_control"] = resolver.refs[oac]
    [headers] = _of_type(resources, active, "AWS::CloudFront::ResponseHeadersPolicy")
    held = fillers.held[resolver.refs[headers]]
    custom = {h["Header"]: h["Value"] for h in held["CustomHeadersConfig"]["Items"]}
    if not held["SecurityHeadersConfig"]["ContentTypeOptions"]["Override"] or custom != {"Content-Disposition": "attachment"}:
        raise Failed(f"{headers}: {held}")

    # The bucket as an origin, through the origin access control (moto keeps
    # no OriginAccessControlId: checked in the configuration sent).
    regional = f"{bucket}.s3.{resolver.pseudo['AWS::Region']}.amazonaws.com"
    archives = [o for o in origins.values() if o["DomainName"] == regional]
    if len(archives) != 1:
        raise Failed(f"no origin is the bucket's {regional}: {sorted(o['DomainName'] for o in origins.values())}")
    origin_id = archives[0]["Id"]
    sent = {o["Id"]: o for o in fillers.distributions[dist_id]["Origins"]["Items"]}[origin_id]
    if sent.get("OriginAccessControlId") != resolver.refs[oac]:
        raise Failed(f"origin {origin_id}: OriginAccessControlId {sent.get('OriginAccessControlId')!r}")
    for path in ARCHIVE_PATHS:
        b = behaviours.get(path)
        if b is None:
            raise Failed(f"the distribution has no {path} behaviour: {sorted(behaviours)}")
        trusted = b.get("TrustedKeyGroups") or {}
        problems = [
            what for what, bad in [
                ("TargetOriginId", b["TargetOriginId"] != origin_id),
                ("TrustedKeyGroups", not trusted.get("Enabled") or trusted.get("Items") != [resolver.refs[group]]),
                ("AllowedMethods", sorted(b["AllowedMethods"]["Items"]) != ["GET", "HEAD"]),
                ("CachePolicyId", b.get("CachePolicyId") != CACHING_OPTIMIZED),
                ("ResponseHeadersPolicyId", b.get("ResponseHeadersPolicyId") != resolver.refs[headers]),
                ("ViewerProtocolPolicy", b["ViewerProtocolPolicy"] != "https-only"),
            ] if bad]
        if problems:
            raise Failed(f"behaviour {path}: {problems}: {b}")
    out["behaviours"] = {p: behaviours[p]["TargetOriginId"] for p in ARCHIVE_PATHS}

    # The bucket: the distribution alone may read archives/ and cache/.
    source = f"arn:aws:cloudfront::{account}:distribution/{dist_id}"
    want = {"Effect": "Allow", "Principal": {"Service": "cloudfront.amazonaws.com"}, "Action": "s3:GetObject",
            "Resource": [f"arn:aws:s3:::{bucket}/archives/*", f"arn:aws:s3:::{bucket}/cache/*"],
            "Condition": {"StringEquals": {"AWS:SourceArn": source}}}
    if [{k: v for k, v in st.items() if k != "Sid"} for st in allows] != [want]:
        raise Failed(f"bucket policy: its Allow statements {allows}, not only {want}")
    if not any(st["Effect"] == "Deny" and st.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") == "false"
               for st in statements):
        raise Failed("bucket policy: no DenyInsecureTransport")

    # The signing functions: the signing slot's key id, the registry's URL,
    # and a private key whose public half is that key.
    slot = resolver.parameters["ArchiveSigningKeySlot"]
    key_id = keys.get(f"ArchiveSigningKey{slot}")
    host = resolver.parameters["DomainName"] or resolver.attrs[(distribution, "DomainName")]
    references = set()
    for lid, env in signers.items():
        if env.get("TFREG_CLOUDFRONT_KEY_PAIR_ID") != key_id or env.get("TFREG_ARCHIVE_URL") != f"https://{host}":
            raise Failed(f"{lid}: key pair {env.get('TFREG_CLOUDFRONT_KEY_PAIR_ID')!r} (slot {slot}: {key_id}), "
                         f"archive URL {env.get('TFREG_ARCHIVE_URL')!r} (https://{host})")
        references.add(env["TFREG_ARCHIVE_SIGNING_KEY"])
    if len(references) != 1:
        raise Failed(f"the signing functions read different keys: {sorted(references)}")
    [reference] = references
    if reference.startswith("arn:"):
        pem = clients("secretsmanager").get_secret_value(SecretId=reference)["SecretString"]
    else:
        pem = clients("ssm").get_parameter(Name=reference, WithDecryption=True)["Parameter"]["Value"]
    public = serialization.load_pem_private_key(pem.encode(), password=None).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    encoded = cf.get_public_key(Id=key_id)["PublicKey"]["PublicKeyConfig"]["EncodedKey"]
    if public != encoded:
        raise Failed(f"the private key at {reference} is not the pair of slot {slot}'s public key {key_id}")
    out["signing"] = {"slot": slot, "key_pair_id": key_id, "key_reference": reference}
    return out
