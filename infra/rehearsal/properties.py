"""Properties moto's CloudFormation accepts and ignores on the resources it
does create (a table's TTL and point-in-time recovery, a bucket's
versioning, lifecycle, public access block and ownership), set through the
service API and read back; a function's checked as far as moto holds it.
Each `fill_X(physical, props)` returns the property names it had to set; a
property read back different from the template fails."""

import json

from .gapfill import GapError


class PropertyError(Exception):
    pass


def _check(what, got, want):
    if got != want:
        raise PropertyError(f"{what}: reads back {got!r}, the template says {want!r}")


def _true(v):
    return v is True or v == "true"


class Properties:
    """`stand_in`: the ARN that may assume the functions' roles in moto,
    standing in for lambda.amazonaws.com (the deployer)."""

    def __init__(self, clients, stand_in):
        self.clients = clients
        self.stand_in = stand_in
        self.unversioned = []
        # Properties moto cannot hold, checked from the template instead.
        self.unheld = []

    def fill_role(self, name, props):
        """moto keeps a CloudFormation role's inline policies as Python
        objects its access control cannot read (every request signed with the
        role's credentials fails 500): each is put again as JSON, the same
        document (with Version 2012-10-17 when it has none: moto refuses
        IAM's older default). Its trust policy keeps lambda.amazonaws.com and
        gains the stand-in as a second principal of that statement (moto fails
        on a statement with a Service principal only).

        moto authorizes DynamoDB, SSM, Secrets Manager, Lambda, ... requests
        against the resource "*" (only S3, IAM, SQS and STS against the real
        ARN), so a statement naming a table's ARN would deny everything: in
        moto's copy such a statement's Resource is "*". moto so checks the
        actions; check_policy_resources checks that every ARN the template
        names exists."""
        iam = self.clients("iam")
        filled = []
        for policy in props.get("Policies", []):
            doc = held(policy["PolicyDocument"])
            if "Version" not in policy["PolicyDocument"]:
                self.unversioned.append(f"{name}/{policy['PolicyName']}")
            iam.put_role_policy(RoleName=name, PolicyName=policy["PolicyName"], PolicyDocument=json.dumps(doc))
            got = iam.get_role_policy(RoleName=name, PolicyName=policy["PolicyName"])["PolicyDocument"]
            _check(f"{name} policy {policy['PolicyName']}", json.loads(got) if isinstance(got, str) else got, doc)
            filled.append(f"Policies.{policy['PolicyName']}")
        managed = props.get("ManagedPolicyArns", [])
        attached = [p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]]
        for arn in managed:
            if arn not in attached:
                if not arn.startswith("arn:aws:iam::aws:policy/"):
                    raise PropertyError(f"{name}: managed policy {arn} is not attached")
                # moto loads no AWS managed policy unless started to.
                self.unheld.append(f"{name}.ManagedPolicyArns {arn}")
        trust = props["AssumeRolePolicyDocument"]
        services = [st for st in trust["Statement"] if "Service" in st.get("Principal", {})]
        if services and self.stand_in:
            trust = json.loads(json.dumps(trust))
            for st in trust["Statement"]:
                if "Service" in st.get("Principal", {}):
                    st["Principal"]["AWS"] = self.stand_in
            iam.update_assume_role_policy(RoleName=name, PolicyDocument=json.dumps(trust))
            filled.append("AssumeRolePolicyDocument (stand-in principal)")
        return filled

    def fill_table(self, name, props):
        c = self.clients("dynamodb")
        filled = []
        ttl = props.get("TimeToLiveSpecification")
        if ttl and _true(ttl.get("Enabled")):
            got = c.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
            if got.get("TimeToLiveStatus") != "ENABLED":
                c.update_time_to_live(TableName=name, TimeToLiveSpecification={
                    "AttributeName": ttl["AttributeName"], "Enabled": True})
                filled.append("TimeToLiveSpecification")
            got = c.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
            _check(f"{name} TTL", (got.get("TimeToLiveStatus"), got.get("AttributeName")),
                   ("ENABLED", ttl["AttributeName"]))
        pitr = props.get("PointInTimeRecoverySpecification")
        if pitr is not None:
            want = "ENABLED" if _true(pitr.get("PointInTimeRecoveryEnabled")) else "DISABLED"

            def status():
                d = c.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
                return d["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"]

            if status() != want:
                c.update_continuous_backups(TableName=name, PointInTimeRecoverySpecification={
                    "PointInTimeRecoveryEnabled": want == "ENABLED"})
                filled.append("PointInTimeRecoverySpecification")
            _check(f"{name} point-in-time recovery", status(), want)
        if "DeletionProtectionEnabled" in props:
            got = c.describe_table(TableName=name)["Table"].get("DeletionProtectionEnabled", False)
            _check(f"{name} deletion protection", got, _true(props["DeletionProtectionEnabled"]))
        return filled

    def fill_bucket(self, name, props):
        c = self.clients("s3")
        filled = []
        missing = c.exceptions.ClientError

        def read(op, key=None):
            try:
                got = getattr(c, op)(Bucket=name)
            except missing:
                return None
            got.pop("ResponseMetadata", None)
            return got.get(key) if key else got

        def ensure(prop, want, get, key, put, **kwargs):
            """`prop` read back as `want`, put first when moto did not."""
            if read(get, key) != want:
                getattr(c, put)(Bucket=name, **kwargs)
                filled.append(prop)
            _check(f"{name} {prop}", read(get, key), want)

        versioning = props.get("VersioningConfiguration")
        if versioning:
            status = versioning["Status"]
            ensure("VersioningConfiguration", status, "get_bucket_versioning", "Status",
                   "put_bucket_versioning", VersioningConfiguration={"Status": status})
        block = props.get("PublicAccessBlockConfiguration")
        if block:
            want = {k: _true(v) for k, v in block.items()}
            ensure("PublicAccessBlockConfiguration", want, "get_public_access_block",
                   "PublicAccessBlockConfiguration", "put_public_access_block",
                   PublicAccessBlockConfiguration=want)
        ownership = props.get("OwnershipControls")
        if ownership:
            want = {"Rules": [{"ObjectOwnership": r["ObjectOwnership"]} for r in ownership["Rules"]]}
            ensure("OwnershipControls", want, "get_bucket_ownership_controls", "OwnershipControls",
                   "put_bucket_ownership_controls", OwnershipControls=want)
        encryption = props.get("BucketEncryption")
        if encryption:
            rules = read("get_bucket_encryption", "ServerSideEncryptionConfiguration") or {}
            algos = [r["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] for r in rules.get("Rules", [])]
            want = [r["ServerSideEncryptionByDefault"]["SSEAlgorithm"]
                    for r in encryption["ServerSideEncryptionConfiguration"]]
            _check(f"{name} encryption", algos, want)
        lifecycle = props.get("LifecycleConfiguration")
        if lifecycle:
            want = [lifecycle_rule(r) for r in lifecycle["Rules"]]
            if read("get_bucket_lifecycle_configuration", "Rules") is None:
                c.put_bucket_lifecycle_configuration(Bucket=name, LifecycleConfiguration={"Rules": want})
                filled.append("LifecycleConfiguration")
            got = read("get_bucket_lifecycle_configuration", "Rules") or []
            _check(f"{name} lifecycle rules", sorted(r["ID"] for r in got), sorted(r["ID"] for r in want))
        return filled

    def fill_function(self, name, props):
        """moto's Lambda (5.2.5) keeps no Architectures, EphemeralStorage or
        LoggingConfig from CloudFormation and no API call sets them
        (UpdateFunctionConfiguration ignores them), so those are checked here
        from the template: the log group it logs to exists, the sizes are
        Lambda's. The rest is read back."""
        conf = self.clients("lambda").get_function_configuration(FunctionName=name)
        for key in ("Timeout", "MemorySize"):
            if key in props:
                _check(f"{name} {key}", conf[key], int(props[key]))
        for key in ("Runtime", "Handler", "Role"):
            if key in props:
                _check(f"{name} {key}", conf[key], props[key])
        arch = props.get("Architectures", ["x86_64"])
        if len(arch) != 1 or arch[0] not in ("x86_64", "arm64"):
            raise PropertyError(f"{name}: Architectures {arch} is not one of x86_64, arm64")
        size = int(props.get("EphemeralStorage", {}).get("Size", 512))
        if not 512 <= size <= 10240:
            raise PropertyError(f"{name}: EphemeralStorage {size} MB is outside 512-10240")
        self.unheld += [f"{name}.{k}" for k in ("Architectures", "EphemeralStorage", "LoggingConfig") if k in props]
        group = props.get("LoggingConfig", {}).get("LogGroup")
        if group:
            groups = self.clients("logs").describe_log_groups(logGroupNamePrefix=group)["logGroups"]
            if not any(g["logGroupName"] == group for g in groups):
                raise PropertyError(f"{name}: its log group {group} does not exist")
        return []


    def fill_log_group(self, name, props):
        c = self.clients("logs")

        def retention():
            groups = c.describe_log_groups(logGroupNamePrefix=name)["logGroups"]
            return next(g for g in groups if g["logGroupName"] == name).get("retentionInDays")

        filled = []
        if "RetentionInDays" in props:
            want = int(props["RetentionInDays"])
            if retention() != want:
                c.put_retention_policy(logGroupName=name, retentionInDays=want)
                filled.append("RetentionInDays")
            _check(f"{name} retention", retention(), want)
        return filled


# Services whose requests moto authorizes against their real resource ARN.
RESOURCE_CHECKED = {"s3", "iam", "sqs", "sts"}


def held(document):
    """A policy document as moto can enforce it (see Properties.fill_role)."""
    doc = json.loads(json.dumps(document))
    doc.setdefault("Version", "2012-10-17")
    statements = doc["Statement"] if isinstance(doc["Statement"], list) else [doc["Statement"]]
    for st in statements:
        actions = st.get("Action", [])
        services = {a.split(":", 1)[0] for a in ([actions] if isinstance(actions, str) else actions)}
        if services & RESOURCE_CHECKED and services - RESOURCE_CHECKED:
            raise PropertyError(f"statement {st.get('Sid', '?')} mixes {sorted(services)}: split it")
        if services and not services & RESOURCE_CHECKED and "Resource" in st:
            st["Resource"] = "*"
    return doc


def lifecycle_rule(rule):
    """A CloudFormation lifecycle rule in the S3 API's form."""
    out = {"ID": rule["Id"], "Status": rule["Status"], "Filter": {"Prefix": rule.get("Prefix", "")}}
    expiration = {}
    if "ExpirationInDays" in rule:
        expiration["Days"] = int(rule["ExpirationInDays"])
    if "ExpiredObjectDeleteMarker" in rule:
        expiration["ExpiredObjectDeleteMarker"] = _true(rule["ExpiredObjectDeleteMarker"])
    if expiration:
        out["Expiration"] = expiration
    if "NoncurrentVersionExpiration" in rule:
        out["NoncurrentVersionExpiration"] = {
            "NoncurrentDays": int(rule["NoncurrentVersionExpiration"]["NoncurrentDays"])}
    if "AbortIncompleteMultipartUpload" in rule:
        out["AbortIncompleteMultipartUpload"] = {
            "DaysAfterInitiation": int(rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"])}
    known = {"Id", "Status", "Prefix", "ExpirationInDays", "ExpiredObjectDeleteMarker",
             "NoncurrentVersionExpiration", "AbortIncompleteMultipartUpload"}
    unknown = set(rule) - known
    if unknown:
        raise GapError(f"lifecycle rule {rule['Id']}: {sorted(unknown)} not known to the rehearsal")
    return out


# type → Properties method (types with properties moto may ignore)
FILLED_TYPES = {
    "AWS::Logs::LogGroup": "fill_log_group",
    "AWS::IAM::Role": "fill_role",
    "AWS::DynamoDB::Table": "fill_table",
    "AWS::S3::Bucket": "fill_bucket",
    "AWS::Lambda::Function": "fill_function",
}
