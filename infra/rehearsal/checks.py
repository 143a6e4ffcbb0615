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
    for config in fillers.distributions:
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


