"""`up`: the stack created on moto as `sam deploy` would create it, the gap
filler making what moto's CloudFormation skips, everything read back and
checked, the facts written. `down`: the stack deleted, retention checked."""

import copy
import fnmatch
import io
import json
import random
import re
import sys
import uuid
import zipfile
from pathlib import Path

from . import configs, moto, template
from .cfn import CFN_TYPES, NO_PHYSICAL_ID, Stacked
from .gapfill import GAP_TYPES, Fillers
from .properties import FILLED_TYPES, Properties, PropertyError
from .intrinsics import Resolver, Unresolved, references, substitute

PSEUDO_STATIC = {"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com", "AWS::NotificationARNs": []}


class Failed(SystemExit):
    """The rehearsal found something wrong: the message says what."""


def say(msg):
    print(f"rehearse: {msg}", file=sys.stderr, flush=True)


def placeholder_zip():
    """A function package moto stores and never runs (the real binaries run
    outside moto, with the role's credentials)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("bootstrap", "#!/bin/sh\necho 'rehearsal placeholder: moto never runs this' >&2\nexit 1\n")
    return buf.getvalue()


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


def dependencies(resource, names):
    deps = references(resource.get("Properties", {})) | references(resource.get("Condition", {}))
    depends_on = resource.get("DependsOn", [])
    deps |= set([depends_on] if isinstance(depends_on, str) else depends_on)
    return deps & names


def plan_gaps(active):
    """The gap resources in creation order, split: `pre` need only each other
    (made before CreateStack, their values substituted into the template),
    `post` need the stack's own resources (made after). A stack resource or
    output that needs a `post` one cannot be ordered: fail."""
    names = set(active)
    gap = {lid for lid, r in active.items() if r["Type"] in GAP_TYPES}
    deps = {lid: dependencies(r, names) for lid, r in active.items()}
    order, done = [], set()
    while len(order) < len(gap):
        ready = sorted(lid for lid in gap - done if deps[lid] & gap <= done)
        if not ready:
            raise Failed(f"gap resources depend on each other in a circle: {sorted(gap - done)}")
        order += ready
        done |= set(ready)
    needs_stack = set()
    for lid in order:
        if deps[lid] - gap or deps[lid] & needs_stack:
            needs_stack.add(lid)
    pre = [lid for lid in order if lid not in needs_stack]
    post = [lid for lid in order if lid in needs_stack]
    return pre, post, deps


def create_gap(fillers, resolver, resources, lid, records):
    r = resources[lid]
    method = GAP_TYPES[r["Type"]]
    try:
        props = resolver.value(r.get("Properties", {}))
    except Unresolved as e:
        raise Failed(f"{lid}: {e} has no value when the gap filler creates it")
    ref, attrs, info = getattr(fillers, f"create_{method}")(lid, props)
    resolver.refs[lid] = ref
    for k, v in attrs.items():
        resolver.attrs[(lid, k)] = v
    records.append({"logical_id": lid, "type": r["Type"], "ref": ref, "info": info,
                    "retain": r.get("DeletionPolicy") == "Retain"})


def stack_template(transformed, gap_all, resolver, created):
    """What CreateStack gets: the gap resources left out, every reference to
    one replaced by its value."""
    out = copy.deepcopy(transformed)
    resources = {}
    for lid, r in transformed["Resources"].items():
        if lid in gap_all:
            continue
        r = substitute(r, resolver, created)
        if "DependsOn" in r:
            d = r["DependsOn"]
            d = [x for x in ([d] if isinstance(d, str) else d) if x not in gap_all]
            if d:
                r["DependsOn"] = d
            else:
                del r["DependsOn"]
        resources[lid] = r
    out["Resources"] = resources
    out["Outputs"] = substitute(transformed.get("Outputs", {}), resolver, created)
    return out


def unresolved(value):
    text = json.dumps(value)
    return value in ("", None) or "${" in text or "None" in text or '"Fn::' in text or '"Ref"' in text


def evaluated(resolver, node, what):
    try:
        return resolver.value(node)
    except Unresolved as e:
        raise Failed(f"{what}: {e} does not resolve")


def up(args, repo):
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    conf = configs.samconfig(repo / "samconfig.toml")
    make_params, default_region = configs.CONFIGS[args.config]
    region = args.region or (conf["region"] if args.config == "guided" else None) or default_region
    stack_name = conf["stack_name"]
    facts = {"config": args.config, "region": region, "stack_name": stack_name}

    if args.moto_url:
        url, pid = args.moto_url.rstrip("/"), None
    else:
        url, pid = moto.start(args.moto_server, out / "moto.log")
    facts["moto"] = {"url": url, "pid": pid}
    (out / "facts.json").write_text(json.dumps(facts, indent=2))
    try:
        create(args, facts, out, url, region, stack_name, conf, make_params, repo)
    except BaseException:
        if pid:
            moto.stop(pid)
        raise


def create(args, facts, out, url, region, stack_name, conf, make_params, repo):

    creds = moto.deployer(url, region, f"deployer-{stack_name}-{region}")
    facts["credentials"] = creds

    def clients(service, r=region):
        return moto.client(url, service, r, creds)

    account = clients("sts").get_caller_identity()["Account"]
    facts["account"] = account
    given = make_params(clients, region)

    # `sam package`: each package's zip in the deployment bucket.
    source = template.load(Path(args.template) if args.template else repo / "template.yaml")
    deploy_bucket = f"tfreg-rehearsal-deployments-{region}"
    s3 = clients("s3")
    if region == "us-east-1":
        s3.create_bucket(Bucket=deploy_bucket)
    else:
        s3.create_bucket(Bucket=deploy_bucket, CreateBucketConfiguration={"LocationConstraint": region})
    keys, body = {}, placeholder_zip()
    for lid, (code_uri, _) in template.packages(source).items():
        keys[lid] = f"{stack_name}/{code_uri.strip('/').replace('/', '-')}.zip"
        s3.put_object(Bucket=deploy_bucket, Key=keys[lid], Body=body)

    transformed = template.translate(template.package(source, deploy_bucket, keys), given, region)
    (out / "transformed.json").write_text(json.dumps(transformed, indent=2))
    size = template.size(transformed)
    facts["transformed"] = {"path": str(out / "transformed.json"), "bytes": size,
                            "over_template_body_limit": size > template.TEMPLATE_BODY_LIMIT}
    say(f"transformed template: {size} bytes (inline --template-body limit {template.TEMPLATE_BODY_LIMIT})")

    check_types(transformed)
    params = parameter_values(transformed, given)
    seed = random.randrange(1, 2**31)
    predicted_id = (f"arn:aws:cloudformation:{region}:{account}:stack/{stack_name}/"
                    f"{uuid.UUID(int=random.Random(seed).getrandbits(128), version=4)}")
    pseudo = dict(PSEUDO_STATIC, **{"AWS::Region": region, "AWS::AccountId": account,
                                    "AWS::StackName": stack_name, "AWS::StackId": predicted_id})
    resolver = Resolver(transformed, params, pseudo)
    check_rules(transformed, resolver)
    caps = conf["capabilities"]
    named = [lid for lid, r in transformed["Resources"].items()
             if r["Type"] == "AWS::IAM::Role" and "RoleName" in r.get("Properties", {})]
    if named and "CAPABILITY_NAMED_IAM" not in caps:
        raise Failed(f"roles {named} are named: samconfig.toml's capabilities need CAPABILITY_NAMED_IAM")

    resources = transformed["Resources"]
    active = {lid: r for lid, r in resources.items() if resolver.active(r)}
    pre, post, deps = plan_gaps(active)
    gap_all = {lid for lid, r in resources.items() if r["Type"] in GAP_TYPES}
    stack_ids = sorted(set(active) - gap_all)
    outputs = {k: o for k, o in transformed.get("Outputs", {}).items() if resolver.active(o)}
    for lid in stack_ids:
        late = deps[lid] & set(post)
        if late:
            raise Failed(f"{lid} needs {sorted(late)}, which the gap filler can only make after the stack")
    for k, o in outputs.items():
        late = references(o["Value"]) & set(post)
        if late:
            raise Failed(f"output {k} needs {sorted(late)}, made only after the stack")

    fillers = Fillers(clients, stack_name)
    records = []
    for lid in pre:
        create_gap(fillers, resolver, resources, lid, records)
    facts["gap_filled"] = records
    (out / "facts.json").write_text(json.dumps(facts, indent=2))

    body = stack_template(transformed, gap_all, resolver, set(pre))
    key = f"{stack_name}/{stack_name}.template.json"
    s3.put_object(Bucket=deploy_bucket, Key=key, Body=json.dumps(body).encode())
    cfn = clients("cloudformation")
    moto.post(url, f"/moto-api/seed?a={seed}")
    made = cfn.create_stack(
        StackName=stack_name,
        TemplateURL=f"https://{deploy_bucket}.s3.amazonaws.com/{key}",
        Parameters=[{"ParameterKey": k, "ParameterValue": str(v)} for k, v in given.items()],
        Capabilities=caps,
    )
    stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    if stack["StackStatus"] != "CREATE_COMPLETE":
        raise Failed(f"stack {stack_name}: {stack['StackStatus']} {stack.get('StackStatusReason', '')}")
    if made["StackId"] != predicted_id:
        raise Failed(f"StackId {made['StackId']} is not the one the gap filler used ({predicted_id})")
    facts["stack_id"] = made["StackId"]
    say(f"stack {stack_name} CREATE_COMPLETE in {region}; gap filler made {len(pre)} before it")

    # moto lists a resource whose condition is false as an entry without a
    # logical id, and gives a Lambda permission no physical id.
    listed = [r for r in cfn.describe_stack_resources(StackName=stack_name)["StackResources"]
              if "LogicalResourceId" in r]
    nameless = sorted(f"{r['LogicalResourceId']} ({r['ResourceType']})" for r in listed
                      if not r.get("PhysicalResourceId") and r["ResourceType"] not in NO_PHYSICAL_ID)
    if nameless:
        raise Failed(f"moto's CloudFormation lists without a physical id: {nameless}")
    physical = {r["LogicalResourceId"]: r.get("PhysicalResourceId", "") for r in listed}
    skipped = sorted(set(stack_ids) - set(physical))
    if skipped:
        raise Failed(f"moto's CloudFormation skipped {skipped} (types {sorted({resources[x]['Type'] for x in skipped})}):"
                     " move their types to the gap filler")
    stacked = Stacked(clients, region, account)
    for lid in stack_ids:
        resolver.refs[lid] = physical[lid]
        attrs = CFN_TYPES[resources[lid]["Type"]][1]
        if attrs:
            for k, v in getattr(stacked, attrs)(physical[lid]).items():
                resolver.attrs[(lid, k)] = v

    for lid in post:
        create_gap(fillers, resolver, resources, lid, records)
    (out / "facts.json").write_text(json.dumps(facts, indent=2))
    stand_in = clients("sts").get_caller_identity()["Arn"]
    facts["lambda_stand_in"] = stand_in
    facts["filled_properties"] = fill_properties(clients, resolver, resources, stack_ids, stand_in)

    facts["resources"] = verify(resolver, resources, stack_ids, stacked, fillers, records)
    facts["policy_resources"] = check_policy_resources(clients, resolver, resources, stack_ids, given)
    facts["outputs"] = check_outputs(cfn, stack_name, outputs, resolver)
    facts["functions"] = functions(clients, resolver, source, resources, stack_ids)
    facts["routes"] = template.routes(transformed, resolver)
    table = [lid for lid in stack_ids if resources[lid]["Type"] == "AWS::DynamoDB::Table"]
    bucket = [lid for lid in stack_ids if resources[lid]["Type"] == "AWS::S3::Bucket"]
    facts["table"] = physical[table[0]]
    facts["bucket"] = physical[bucket[0]]
    facts["retained"] = sorted(lid for lid in active if resources[lid].get("DeletionPolicy") == "Retain")
    facts["types"] = {
        "cloudformation": sorted({resources[lid]["Type"] for lid in stack_ids}),
        "gap_filler": sorted({resources[lid]["Type"] for lid in pre + post}),
    }
    (out / "facts.json").write_text(json.dumps(facts, indent=2))
    say(f"{len(stack_ids)} resources by moto's CloudFormation, {len(records)} by the gap filler, "
        f"{len(facts['outputs'])} outputs resolved, {len(facts['routes'])} routes")
    print(out / "facts.json")


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
        say(f"{len(props.unversioned)} inline policies have no Version (IAM reads them as 2008-10-17)")
    return filled


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


def down(args):
    out = Path(args.out)
    facts = json.loads((out / "facts.json").read_text())
    url, region, creds = facts["moto"]["url"], facts["region"], facts["credentials"]

    def clients(service, r=region):
        return moto.client(url, service, r, creds)

    fillers = Fillers(clients, facts["stack_name"])
    for rec in reversed(facts["gap_filled"]):
        if not rec["retain"]:
            getattr(fillers, f"delete_{GAP_TYPES[rec['type']]}")(rec["ref"], rec["info"])
    cfn = clients("cloudformation")
    cfn.delete_stack(StackName=facts["stack_name"])
    status = cfn.describe_stacks(StackName=facts["stack_id"])["Stacks"][0]["StackStatus"]
    if status != "DELETE_COMPLETE":
        raise Failed(f"stack {facts['stack_name']}: {status}")
    stacked = Stacked(clients, region, facts["account"])
    kept, gone = [], []
    for lid, res in sorted(facts["resources"].items()):
        if res["by"] == "cloudformation":
            there = getattr(stacked, CFN_TYPES[res["type"]][0])(res["physical"], res["props"])
        else:
            rec = next(r for r in facts["gap_filled"] if r["logical_id"] == lid)
            there = getattr(fillers, f"exists_{GAP_TYPES[res['type']]}")(rec["ref"], rec["info"])
        retain = lid in facts["retained"]
        if there != retain:
            raise Failed(f"{lid} ({res['type']}): {'still exists' if there else 'was deleted'} after DeleteStack"
                         f" ({'DeletionPolicy Retain' if retain else 'not retained'})")
        (kept if there else gone).append(lid)
    result = {"kept": kept, "deleted": gone}
    (out / "down.json").write_text(json.dumps(result, indent=2))
    say(f"stack deleted: kept {kept}, deleted {len(gone)} others")
    if facts["moto"]["pid"] and not args.keep_moto:
        moto.stop(facts["moto"]["pid"])
    print(out / "down.json")
