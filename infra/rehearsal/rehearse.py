"""`up`: the stack created on moto as `sam deploy` would create it, the gap
filler making what moto's CloudFormation skips, everything read back and
checked, the facts written. `down`: the stack deleted, retention checked."""

import copy
import io
import json
import os
import random
import subprocess
import uuid
import zipfile
from pathlib import Path

from . import configs, limits, moto, template
from .cfn import CFN_TYPES, NO_PHYSICAL_ID, Stacked
from .checks import (Failed, check_archives, check_limits, evaluated, check_origins, check_outputs, check_policy_resources, check_rules,
                     check_types, fill_properties, functions, parameter_values, say, verify)
from .gapfill import GAP_TYPES, UNDELETABLE, Fillers
from .intrinsics import Resolver, Unresolved, references, substitute

PSEUDO_STATIC = {"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com", "AWS::NotificationARNs": []}


def placeholder_zip():
    """A function package moto stores and never runs (the real binaries run
    outside moto, with the role's credentials)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("bootstrap", "#!/bin/sh\necho 'rehearsal placeholder: moto never runs this' >&2\nexit 1\n")
    return buf.getvalue()


def dependencies(resource, names):
    deps = references(resource.get("Properties", {})) | references(resource.get("Condition", {}))
    depends_on = resource.get("DependsOn", [])
    deps |= set([depends_on] if isinstance(depends_on, str) else depends_on)
    return deps & names


# Gap types made before the stack without what needs a stack resource (an
# origin on the stack's bucket), and updated with it after (their filler's
# update_X): the functions need the distribution's domain, the distribution
# the bucket's.
LATER = {"AWS::CloudFront::Distribution"}


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
    needs_stack, late = set(), {}
    for lid in order:
        stack_deps = deps[lid] - gap
        if stack_deps and active[lid]["Type"] in LATER:
            late[lid] = stack_deps
            stack_deps = set()
        if stack_deps or deps[lid] & needs_stack:
            needs_stack.add(lid)
    pre = [lid for lid in order if lid not in needs_stack]
    post = [lid for lid in order if lid in needs_stack]
    return pre, post, deps, {lid: names for lid, names in late.items() if lid in pre}


def create_gap(fillers, resolver, resources, lid, records, late=()):
    r = resources[lid]
    method = GAP_TYPES[r["Type"]]
    resolver.late = set(late)
    try:
        props = resolver.value(r.get("Properties", {}))
    except Unresolved as e:
        raise Failed(f"{lid}: {e} has no value when the gap filler creates it")
    finally:
        resolver.late = set()
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


class Rehearsal:
    """One `up`: its settings, the deployer's clients, and what it learns."""

    def __init__(self, args, repo, url, region, conf):
        self.args, self.repo, self.url, self.region, self.conf = args, repo, url, region, conf
        self.out = Path(args.out)
        self.stack_name = conf["stack_name"]
        self.facts = {"config": args.config, "region": region, "stack_name": self.stack_name,
                      "moto": {"url": url, "pid": None}}
        self.creds = None

    def clients(self, service, region=None):
        return moto.client(self.url, service, region or self.region, self.creds)

    def save(self):
        (self.out / "facts.json").write_text(json.dumps(self.facts, indent=2))

    def run(self):
        self.creds = moto.deployer(self.url, self.region, f"deployer-{self.stack_name}-{self.region}")
        self.facts["credentials"] = self.creds
        self.account = self.clients("sts").get_caller_identity()["Account"]
        self.facts["account"] = self.account
        make_params, _ = configs.CONFIGS[self.args.config]
        self.given = make_params(self.clients, self.region, self.archive_key)
        self.facts["given"] = self.given
        self.translate()
        self.plan()
        self.create_stack()
        self.read_back()
        say(f"{len(self.stack_ids)} resources by moto's CloudFormation, {len(self.records)} by the gap filler, "
            f"{len(self.facts['outputs'])} outputs resolved, {len(self.facts['routes'])} routes")

    def archive_key(self, slot, secrets_manager):
        """`infra/archive-key new --stack STACK --slot SLOT`, as the README runs
        it before the first deploy (the AWS CLI with the deployer's
        credentials, AWS_ENDPOINT_URL at moto): the public key it prints."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ENDPOINT_URL=self.url, AWS_ACCESS_KEY_ID=self.creds["AccessKeyId"],
                   AWS_SECRET_ACCESS_KEY=self.creds["SecretAccessKey"], AWS_REGION=self.region,
                   AWS_DEFAULT_REGION=self.region, AWS_EC2_METADATA_DISABLED="true")
        args = [str(self.repo / "infra/archive-key"), "new", "--stack", self.stack_name, "--slot", slot]
        if secrets_manager:
            args.append("--secrets-manager")
        done = subprocess.run(args, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise Failed(f"{' '.join(args[1:])}: {done.stderr.strip()}")
        say(done.stderr.strip().replace("\n", "; "))
        self.facts.setdefault("archive_keys", {})[slot] = {
            "public": done.stdout.strip(), "store": "secretsmanager" if secrets_manager else "ssm"}
        return done.stdout.strip()

    def translate(self):
        """`sam package` (each package's zip in the deployment bucket), then
        the SAM transform with the configuration's parameters."""
        args, region = self.args, self.region
        self.source = template.load(Path(args.template) if args.template else self.repo / "template.yaml")
        self.deploy_bucket = f"tfreg-rehearsal-deployments-{region}"
        s3 = self.clients("s3")
        if region == "us-east-1":
            s3.create_bucket(Bucket=self.deploy_bucket)
        else:
            s3.create_bucket(Bucket=self.deploy_bucket, CreateBucketConfiguration={"LocationConstraint": region})
        keys, body = {}, placeholder_zip()
        for lid, (code_uri, _) in template.packages(self.source).items():
            keys[lid] = f"{self.stack_name}/{code_uri.strip('/').replace('/', '-')}.zip"
            s3.put_object(Bucket=self.deploy_bucket, Key=keys[lid], Body=body)
        packaged = template.package(self.source, self.deploy_bucket, keys)
        self.transformed = template.translate(packaged, self.given, region)
        path = self.out / "transformed.json"
        path.write_text(json.dumps(self.transformed, indent=2))
        self.size = template.size(self.transformed)
        self.facts["transformed"] = {"path": str(path), "bytes": self.size,
                                     "bytes_with_spaces": len(json.dumps(self.transformed).encode()),
                                     "over_template_body_limit": self.size > template.TEMPLATE_BODY_LIMIT}
        say(f"transformed template: {self.size} bytes compact, {self.facts['transformed']['bytes_with_spaces']}"
            f" as json.dumps writes it (inline --template-body limit {template.TEMPLATE_BODY_LIMIT})")

    def plan(self):
        """Everything CreateStack would refuse, checked; the gap filler's order."""
        transformed = self.transformed
        check_types(transformed)
        params = parameter_values(transformed, self.given)
        # The stack's id, known before CreateStack: moto's next uuid4 once seeded.
        self.seed = random.randrange(1, 2**31)
        self.predicted_id = (f"arn:aws:cloudformation:{self.region}:{self.account}:stack/{self.stack_name}/"
                             f"{uuid.UUID(int=random.Random(self.seed).getrandbits(128), version=4)}")
        pseudo = dict(PSEUDO_STATIC, **{"AWS::Region": self.region, "AWS::AccountId": self.account,
                                        "AWS::StackName": self.stack_name, "AWS::StackId": self.predicted_id})
        self.resolver = resolver = Resolver(transformed, params, pseudo)
        check_rules(transformed, resolver)
        caps = self.conf["capabilities"]
        named = [lid for lid, r in transformed["Resources"].items()
                 if r["Type"] == "AWS::IAM::Role" and "RoleName" in r.get("Properties", {})]
        if named and "CAPABILITY_NAMED_IAM" not in caps:
            raise Failed(f"roles {named} are named: samconfig.toml's capabilities need CAPABILITY_NAMED_IAM")
        self.resources = resources = transformed["Resources"]
        self.active = {lid: r for lid, r in resources.items() if resolver.active(r)}
        self.pre, self.post, deps, self.late = plan_gaps(self.active)
        self.gap_all = {lid for lid, r in resources.items() if r["Type"] in GAP_TYPES}
        self.stack_ids = sorted(set(self.active) - self.gap_all)
        self.outputs = {k: o for k, o in transformed.get("Outputs", {}).items() if resolver.active(o)}
        for lid in self.stack_ids:
            late = deps[lid] & set(self.post)
            if late:
                raise Failed(f"{lid} needs {sorted(late)}, which the gap filler can only make after the stack")
        for k, o in self.outputs.items():
            late = references(o["Value"]) & set(self.post)
            if late:
                raise Failed(f"output {k} needs {sorted(late)}, made only after the stack")
        problems = limits.template_limits(transformed, self.size)
        if problems:
            raise Failed("over AWS limits moto does not enforce: " + "; ".join(problems))

    def create_stack(self):
        """The gap resources the stack needs, then CreateStack with the
        template through S3 (as sam deploy sends one over 51,200 bytes)."""
        self.fillers = Fillers(self.clients, self.stack_name)
        self.records = []
        for lid in self.pre:
            create_gap(self.fillers, self.resolver, self.resources, lid, self.records, self.late.get(lid, ()))
        self.facts["gap_filled"] = self.records
        self.save()
        body = stack_template(self.transformed, self.gap_all, self.resolver, set(self.pre))
        key = f"{self.stack_name}/{self.stack_name}.template.json"
        self.clients("s3").put_object(Bucket=self.deploy_bucket, Key=key, Body=json.dumps(body).encode())
        cfn = self.clients("cloudformation")
        moto.post(self.url, f"/moto-api/seed?a={self.seed}")
        made = cfn.create_stack(
            StackName=self.stack_name,
            TemplateURL=f"https://{self.deploy_bucket}.s3.amazonaws.com/{key}",
            Parameters=[{"ParameterKey": k, "ParameterValue": str(v)} for k, v in self.given.items()],
            Capabilities=self.conf["capabilities"],
        )
        stack = cfn.describe_stacks(StackName=self.stack_name)["Stacks"][0]
        if stack["StackStatus"] != "CREATE_COMPLETE":
            raise Failed(f"stack {self.stack_name}: {stack['StackStatus']} {stack.get('StackStatusReason', '')}")
        if made["StackId"] != self.predicted_id:
            raise Failed(f"StackId {made['StackId']} is not the one the gap filler used ({self.predicted_id})")
        self.facts["stack_id"] = made["StackId"]
        say(f"stack {self.stack_name} CREATE_COMPLETE in {self.region}; gap filler made {len(self.pre)} before it")

    def read_back(self):
        """The stack's resources known to the resolver, the rest of the gap
        filled, everything checked, the facts written."""
        facts, resources, resolver = self.facts, self.resources, self.resolver
        cfn = self.clients("cloudformation")
        # moto lists a resource whose condition is false as an entry without a
        # logical id, and gives a Lambda permission no physical id.
        listed = [r for r in cfn.describe_stack_resources(StackName=self.stack_name)["StackResources"]
                  if "LogicalResourceId" in r]
        nameless = sorted(f"{r['LogicalResourceId']} ({r['ResourceType']})" for r in listed
                          if not r.get("PhysicalResourceId") and r["ResourceType"] not in NO_PHYSICAL_ID)
        if nameless:
            raise Failed(f"moto's CloudFormation lists without a physical id: {nameless}")
        physical = {r["LogicalResourceId"]: r.get("PhysicalResourceId", "") for r in listed}
        skipped = sorted(set(self.stack_ids) - set(physical))
        if skipped:
            types = sorted({resources[x]["Type"] for x in skipped})
            raise Failed(f"moto's CloudFormation skipped {skipped} (types {types}): move their types to the gap filler")
        stacked = Stacked(self.clients, self.region, self.account)
        for lid in self.stack_ids:
            resolver.refs[lid] = physical[lid]
            attrs = CFN_TYPES[resources[lid]["Type"]][1]
            if attrs:
                for k, v in getattr(stacked, attrs)(physical[lid]).items():
                    resolver.attrs[(lid, k)] = v
        for lid in self.late:
            method = GAP_TYPES[resources[lid]["Type"]]
            props = evaluated(resolver, resources[lid].get("Properties", {}), lid)
            getattr(self.fillers, f"update_{method}")(resolver.refs[lid], lid, props)
        if self.late:
            say(f"gap filler completed {sorted(self.late)} with the stack's {sorted(set().union(*self.late.values()))}")
        for lid in self.post:
            create_gap(self.fillers, resolver, resources, lid, self.records)
        self.save()

        stand_in = self.clients("sts").get_caller_identity()["Arn"]
        facts["lambda_stand_in"] = stand_in
        facts["filled_properties"] = fill_properties(self.clients, resolver, resources, self.stack_ids, stand_in)
        facts["limits"] = check_limits(resolver, self.active)
        facts["resources"] = verify(resolver, resources, self.stack_ids, stacked, self.fillers, self.records)
        facts["policy_resources"] = check_policy_resources(self.clients, resolver, resources, self.stack_ids,
                                                           self.given)
        facts["outputs"] = check_outputs(cfn, self.stack_name, self.outputs, resolver)
        check_origins(self.fillers, facts["outputs"])
        facts["functions"] = functions(self.clients, resolver, self.source, resources, self.stack_ids)
        facts["routes"] = template.routes(self.transformed, resolver)
        facts["archives"] = check_archives(self.clients, resolver, resources, self.active, self.fillers,
                                           facts["functions"])
        by_type = {t: [lid for lid in self.stack_ids if resources[lid]["Type"] == t]
                   for t in ("AWS::DynamoDB::Table", "AWS::S3::Bucket")}
        facts["table"] = physical[by_type["AWS::DynamoDB::Table"][0]]
        facts["bucket"] = physical[by_type["AWS::S3::Bucket"][0]]
        facts["retained"] = sorted(lid for lid in self.active if resources[lid].get("DeletionPolicy") == "Retain")
        facts["types"] = {
            "cloudformation": sorted({resources[lid]["Type"] for lid in self.stack_ids}),
            "gap_filler": sorted({resources[lid]["Type"] for lid in self.pre + self.post}),
        }
        self.save()


def up(args, repo):
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    conf = configs.samconfig(repo / "samconfig.toml")
    _, default_region = configs.CONFIGS[args.config]
    region = args.region or (conf["region"] if args.config == "guided" else None) or default_region
    if args.moto_url:
        url, pid = args.moto_url.rstrip("/"), None
    else:
        url, pid = moto.start(args.moto_server, out / "moto.log")
    run = Rehearsal(args, repo, url, region, conf)
    run.facts["moto"]["pid"] = pid
    run.save()
    try:
        run.run()
    except BaseException:
        if pid:
            moto.stop(pid)
        raise
    print(out / "facts.json")


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
    kept, gone, left = [], [], []
    for lid, res in sorted(facts["resources"].items()):
        if res["type"] in UNDELETABLE:
            left.append(lid)
            continue
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
    result = {"kept": kept, "deleted": gone, "left_on_moto": left}
    (out / "down.json").write_text(json.dumps(result, indent=2))
    say(f"stack deleted: kept {kept}, deleted {len(gone)} others"
        + (f", left {left} (moto cannot delete {sorted(UNDELETABLE)})" if left else ""))
    if facts["moto"]["pid"] and not args.keep_moto:
        moto.stop(facts["moto"]["pid"])
    print(out / "down.json")
