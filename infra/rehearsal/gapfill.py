"""The gap filler: the resource types moto's CloudFormation skips (it warns
"No Moto CloudFormation support" and reports CREATE_COMPLETE without them),
created through moto's own service APIs from the transformed template's
evaluated properties, as CloudFormation would create them.

Each filler's `create(logical_id, props)` returns (Ref value, {attribute: value},
a function that deletes it) and `exists(ref)` asks the service whether it is
there. Properties are mapped onto the API's input shape by botocore's service
model (`shaped`): a property the API does not know fails loudly.
"""

import json

from botocore.model import ListShape, StructureShape


class GapError(Exception):
    pass


# What the resolver answers for a stack resource's value while a gap resource
# made before the stack is evaluated (intrinsics.Resolver.late).
LATE = "<made-with-the-stack>"


# CloudFormation property names that are not the API member's name in another case.
RENAMES = {"IPV6Enabled": "IsIPV6Enabled"}


def shaped(value, shape, path="", defaults=None):
    """`value` (CloudFormation's form) in the API's form for `shape`: members
    matched case-insensitively, lists of {Quantity, Items} wrappers made,
    numbers and booleans from their string forms. Unknown members fail."""
    defaults = defaults or {}
    if isinstance(shape, StructureShape):
        members = shape.members
        if isinstance(value, list) and "Items" in members and "Quantity" in members:
            items = [shaped(v, members["Items"].member, f"{path}[]", defaults) for v in value]
            return {"Quantity": len(items), "Items": items}
        if not isinstance(value, dict):
            raise GapError(f"{path}: {value!r} is not a structure ({shape.name})")
        by_lower = {name.lower(): name for name in members}
        out = dict(defaults.get(shape.name, {}))
        for key, v in value.items():
            name = by_lower.get(RENAMES.get(key, key).lower())
            if name is None:
                raise GapError(f"{path}.{key}: not a member of {shape.name}")
            out[name] = shaped(v, members[name], f"{path}.{key}", defaults)
        if "Quantity" in members and "Items" in out and "Quantity" not in out:
            out["Quantity"] = len(out["Items"])
        missing = [m for m in shape.required_members if m not in out]
        if missing:
            raise GapError(f"{path}: {shape.name} lacks {missing}")
        return out
    if isinstance(shape, ListShape):
        if not isinstance(value, list):
            raise GapError(f"{path}: {value!r} is not a list")
        return [shaped(v, shape.member, f"{path}[]", defaults) for v in value]
    kind = shape.type_name
    if kind in ("integer", "long"):
        return int(value)
    if kind in ("float", "double"):
        return float(value)
    if kind == "boolean":
        if isinstance(value, str):
            if value not in ("true", "false"):
                raise GapError(f"{path}: {value!r} is not a boolean")
            return value == "true"
        return bool(value)
    if kind == "blob":
        return value.encode() if isinstance(value, str) else value
    if kind == "map":
        return {k: shaped(v, shape.value, f"{path}.{k}", defaults) for k, v in value.items()}
    return value


def call(client, operation, props, drop=(), defaults=None, **extra):
    """client.operation with `props` shaped to its input (minus `drop`) plus `extra`."""
    op = client.meta.service_model.operation_model(operation)
    given = {k: v for k, v in props.items() if k not in drop}
    kwargs = {}
    for key, v in given.items():
        name = {n.lower(): n for n in op.input_shape.members}.get(key.lower())
        if name is None:
            raise GapError(f"{operation}: property {key} has no API member")
        kwargs[name] = shaped(v, op.input_shape.members[name], key, defaults)
    kwargs.update(extra)
    method = getattr(client, _snake(operation))
    return method(**kwargs)


def _snake(name):
    out = ""
    for i, c in enumerate(name):
        if c.isupper() and i:
            out += "_"
        out += c.lower()
    return out


def _probe(client, fn):
    try:
        fn()
        return True
    except client.exceptions.ClientError as e:
        code = e.response["Error"]["Code"]
        if e.response["ResponseMetadata"]["HTTPStatusCode"] == 404 or "NotFound" in code or "NoSuch" in code:
            return False
        raise


class Fillers:
    """The gap filler for one stack: `clients(service)` gives a boto3 client
    against moto, signed as the deployer. For each type: `create_X(logical_id,
    props)` → (Ref value, {attribute: value}, info to find it again),
    `exists_X(ref, info)`, `delete_X(ref, info)`."""

    def __init__(self, clients, stack_name):
        self.clients = clients
        self.stack_name = stack_name
        self.distributions = {}  # id -> the API configuration sent, for checks
        self.held = {}  # what moto has no API for: the rehearsal's own records
        self.deleted = set()

    # ------------------------------------------------------------ API Gateway v2
    def create_api(self, logical_id, props):
        made = call(self.clients("apigatewayv2"), "CreateApi", props)
        return made["ApiId"], {"ApiEndpoint": made["ApiEndpoint"], "ApiId": made["ApiId"]}, {}

    def exists_api(self, ref, info):
        c = self.clients("apigatewayv2")
        return _probe(c, lambda: c.get_api(ApiId=ref))

    def delete_api(self, ref, info):
        self.clients("apigatewayv2").delete_api(ApiId=ref)

    # A stage, an integration, a route: parts of an API, each named by its
    # id within it. type → (create, its id member, get, delete).
    API_PARTS = {
        "stage": ("CreateStage", "StageName", "get_stage", "delete_stage"),
        "integration": ("CreateIntegration", "IntegrationId", "get_integration", "delete_integration"),
        "route": ("CreateRoute", "RouteId", "get_route", "delete_route"),
    }

    def _create_part(self, part, props):
        create, member, _, _ = self.API_PARTS[part]
        made = call(self.clients("apigatewayv2"), create, props)
        return made[member], {}, {"ApiId": props["ApiId"], "part": part}

    def _exists_part(self, ref, info):
        _, member, get, _ = self.API_PARTS[info["part"]]
        c = self.clients("apigatewayv2")
        return _probe(c, lambda: getattr(c, get)(ApiId=info["ApiId"], **{member: ref}))

    def _delete_part(self, ref, info):
        _, member, _, delete = self.API_PARTS[info["part"]]
        getattr(self.clients("apigatewayv2"), delete)(ApiId=info["ApiId"], **{member: ref})

    def create_stage(self, logical_id, props):
        return self._create_part("stage", props)

    def create_integration(self, logical_id, props):
        return self._create_part("integration", props)

    def create_route(self, logical_id, props):
        return self._create_part("route", props)

    exists_stage = exists_integration = exists_route = _exists_part
    delete_stage = delete_integration = delete_route = _delete_part

    # ------------------------------------------------------------ CloudFront
    def create_cf_function(self, logical_id, props):
        made = call(self.clients("cloudfront"), "CreateFunction", props, drop=("AutoPublish",))
        meta = made["FunctionSummary"]["FunctionMetadata"]
        arn = meta["FunctionARN"]
        attrs = {"FunctionARN": arn, "FunctionMetadata.FunctionARN": arn, "Stage": meta.get("Stage", "")}
        return arn, attrs, {"Name": props["Name"]}

    def exists_cf_function(self, ref, info):
        c = self.clients("cloudfront")
        return _probe(c, lambda: c.describe_function(Name=info["Name"]))

    def delete_cf_function(self, ref, info):
        c = self.clients("cloudfront")
        c.delete_function(Name=info["Name"], IfMatch=c.describe_function(Name=info["Name"])["ETag"])

    def distribution_config(self, logical_id, config):
        """A CloudFormation DistributionConfig in the API's form."""
        c = self.clients("cloudfront")
        # CloudFormation's behaviours carry CachedMethods beside AllowedMethods;
        # the API nests them.
        behaviours = []
        for b in [config["DefaultCacheBehavior"]] + list(config.get("CacheBehaviors", [])):
            b = dict(b)
            cached = b.pop("CachedMethods", None)
            if cached is not None:
                b["AllowedMethods"] = {"Items": b["AllowedMethods"], "CachedMethods": cached}
            # CloudFormation names the key groups; the API says whether any is trusted.
            groups = b.pop("TrustedKeyGroups", None)
            if groups:
                b["TrustedKeyGroups"] = {"Enabled": True, "Items": groups}
            behaviours.append(b)
        config["DefaultCacheBehavior"] = behaviours[0]
        if "CacheBehaviors" in config:
            config["CacheBehaviors"] = behaviours[1:]
        config["CallerReference"] = f"{self.stack_name}-{logical_id}"
        self.check_certificate(config)
        # CloudFormation's defaults for what the API requires.
        defaults = {"CustomOriginConfig": {"HTTPPort": 80, "HTTPSPort": 443}}
        shape = c.meta.service_model.operation_model("CreateDistribution").input_shape
        return shaped(config, shape.members["DistributionConfig"], "DistributionConfig", defaults)

    def create_distribution(self, logical_id, props):
        """Made before the stack (the functions need its domain) from what
        needs no stack resource: an origin whose domain is a stack resource's
        (the archive bucket, `late` in the evaluated properties) and the
        behaviours that target it are left out, and `update_distribution`
        adds them once the stack is there."""
        c = self.clients("cloudfront")
        config = dict(props["DistributionConfig"])
        origins = config["Origins"]
        later = {o["Id"] for o in origins if LATE in json.dumps(o)}
        config["Origins"] = [o for o in origins if o["Id"] not in later]
        if "CacheBehaviors" in config:
            config["CacheBehaviors"] = [b for b in config["CacheBehaviors"] if b["TargetOriginId"] not in later]
        if LATE in json.dumps(config):
            raise GapError(f"{logical_id}: needs a stack resource outside an origin the filler can add later")
        api_config = self.distribution_config(logical_id, config)
        made = c.create_distribution(DistributionConfig=api_config)["Distribution"]
        self.distributions[made["Id"]] = api_config
        return made["Id"], {"DomainName": made["DomainName"], "Id": made["Id"]}, {"later": sorted(later)}

    def update_distribution(self, ref, logical_id, props):
        """The whole configuration, with the stack's resources known (UpdateDistribution)."""
        c = self.clients("cloudfront")
        got = c.get_distribution_config(Id=ref)
        api_config = self.distribution_config(logical_id, dict(props["DistributionConfig"]))
        api_config["CallerReference"] = got["DistributionConfig"]["CallerReference"]
        c.update_distribution(Id=ref, IfMatch=got["ETag"], DistributionConfig=api_config)
        self.distributions[ref] = api_config

    def check_certificate(self, config):
        """CloudFront's rules for a custom domain: the ACM certificate lives in
        us-east-1, whatever the stack's region, and covers every alias."""
        arn = config.get("ViewerCertificate", {}).get("AcmCertificateArn")
        aliases = config.get("Aliases", [])
        if not arn:
            if aliases:
                raise GapError(f"aliases {aliases} without a certificate")
            return
        if arn.split(":")[3] != "us-east-1":
            raise GapError(f"certificate {arn} is not in us-east-1, where CloudFront takes them from")
        cert = self.clients("acm", "us-east-1").describe_certificate(CertificateArn=arn)["Certificate"]
        names = {cert["DomainName"], *cert.get("SubjectAlternativeNames", [])}
        for alias in aliases:
            wildcard = "*." + alias.split(".", 1)[-1]
            if alias not in names and wildcard not in names:
                raise GapError(f"certificate {arn} covers {sorted(names)}, not the alias {alias}")

    def exists_distribution(self, ref, info):
        c = self.clients("cloudfront")
        return _probe(c, lambda: c.get_distribution(Id=ref))

    def delete_distribution(self, ref, info):
        c = self.clients("cloudfront")
        got = c.get_distribution_config(Id=ref)
        config = got["DistributionConfig"]
        config["Enabled"] = False
        etag = c.update_distribution(Id=ref, IfMatch=got["ETag"], DistributionConfig=config)["ETag"]
        c.delete_distribution(Id=ref, IfMatch=etag)

    # ------------------------------------------------------------ Lambda
    def create_invoke_config(self, logical_id, props):
        call(self.clients("lambda"), "PutFunctionEventInvokeConfig", props)
        info = {"FunctionName": props["FunctionName"], "Qualifier": props.get("Qualifier", "$LATEST")}
        return f"{info['FunctionName']}|{info['Qualifier']}", {}, info

    def exists_invoke_config(self, ref, info):
        c = self.clients("lambda")
        return _probe(c, lambda: c.get_function_event_invoke_config(**info))

    def delete_invoke_config(self, ref, info):
        self.clients("lambda").delete_function_event_invoke_config(**info)

    # ------------------------------------------------------------ S3
    def create_bucket_policy(self, logical_id, props):
        bucket = props["Bucket"]
        self.clients("s3").put_bucket_policy(Bucket=bucket, Policy=json.dumps(props["PolicyDocument"]))
        return bucket, {}, {}

    def exists_bucket_policy(self, ref, info):
        c = self.clients("s3")
        return _probe(c, lambda: c.get_bucket_policy(Bucket=ref))

    def delete_bucket_policy(self, ref, info):
        self.clients("s3").delete_bucket_policy(Bucket=ref)


    # ------------------------------------------------------------ CloudFront keys and policies
    def create_public_key(self, logical_id, props):
        c = self.clients("cloudfront")
        made = call(c, "CreatePublicKey", props)["PublicKey"]
        return made["Id"], {"Id": made["Id"], "CreatedTime": str(made["CreatedTime"])}, {}

    def exists_public_key(self, ref, info):
        # moto answers GetPublicKey of an unknown id 500: its list instead.
        keys = self.clients("cloudfront").list_public_keys()["PublicKeyList"].get("Items") or []
        return any(k["Id"] == ref for k in keys)

    def delete_public_key(self, ref, info):
        c = self.clients("cloudfront")
        c.delete_public_key(Id=ref, IfMatch=c.get_public_key(Id=ref)["ETag"])

    def create_key_group(self, logical_id, props):
        made = call(self.clients("cloudfront"), "CreateKeyGroup", props)["KeyGroup"]
        return made["Id"], {"LastModifiedTime": str(made.get("LastModifiedTime", ""))}, {}

    def exists_key_group(self, ref, info):
        groups = self.clients("cloudfront").list_key_groups()["KeyGroupList"].get("Items") or []
        return any(g["KeyGroup"]["Id"] == ref for g in groups)

    def delete_key_group(self, ref, info):
        """moto 5.2.5 has no DeleteKeyGroup (it answers 500): `down` reports
        the group as left on moto (UNDELETABLE), not as retained."""

    def create_origin_access(self, logical_id, props):
        made = call(self.clients("cloudfront"), "CreateOriginAccessControl", props)["OriginAccessControl"]
        return made["Id"], {"Id": made["Id"]}, {}

    def exists_origin_access(self, ref, info):
        c = self.clients("cloudfront")
        return _probe(c, lambda: c.get_origin_access_control(Id=ref))

    def delete_origin_access(self, ref, info):
        c = self.clients("cloudfront")
        c.delete_origin_access_control(Id=ref, IfMatch=c.get_origin_access_control(Id=ref)["ETag"])

    def create_headers_policy(self, logical_id, props):
        """moto 5.2.5 has no response headers policies: the properties are
        shaped to CloudFront's own API model (botocore's
        CreateResponseHeadersPolicy input, which refuses an unknown or
        missing member as for every filler here) and the policy is the
        rehearsal's record, its id made up; the distribution's behaviours
        are checked to name that id."""
        c = self.clients("cloudfront")
        shape = c.meta.service_model.operation_model("CreateResponseHeadersPolicy").input_shape
        config = shaped(props["ResponseHeadersPolicyConfig"], shape.members["ResponseHeadersPolicyConfig"],
                        "ResponseHeadersPolicyConfig")
        ref = f"rehearsal-{logical_id.lower()}"
        self.held[ref] = config
        return ref, {"Id": ref, "LastModifiedTime": ""}, {"held_by": "the rehearsal (moto has no such API)",
                                                         "config": config}

    def exists_headers_policy(self, ref, info):
        return ref in self.held or ("config" in info and ref not in self.deleted)

    def delete_headers_policy(self, ref, info):
        self.held.pop(ref, None)
        self.deleted.add(ref)

    # ------------------------------------------------------------ CloudWatch alarms, SNS subscriptions (issue 38)
    def create_alarm(self, logical_id, props):
        """PutMetricAlarm with the alarm's properties (CloudFormation's names
        are the API's: an unknown one fails), its name given by the template."""
        c = self.clients("cloudwatch")
        if "AlarmName" not in props:
            raise GapError(f"{logical_id}: the rehearsal needs the AlarmName CloudFormation would make up")
        call(c, "PutMetricAlarm", props)
        alarm = c.describe_alarms(AlarmNames=[props["AlarmName"]])["MetricAlarms"][0]
        return props["AlarmName"], {"Arn": alarm["AlarmArn"]}, {}

    def exists_alarm(self, ref, info):
        return bool(self.clients("cloudwatch").describe_alarms(AlarmNames=[ref])["MetricAlarms"])

    def delete_alarm(self, ref, info):
        self.clients("cloudwatch").delete_alarms(AlarmNames=[ref])

    def create_subscription(self, logical_id, props):
        arn = call(self.clients("sns"), "Subscribe", props, ReturnSubscriptionArn=True)["SubscriptionArn"]
        return arn, {"Arn": arn}, {"TopicArn": props["TopicArn"]}

    def exists_subscription(self, ref, info):
        c = self.clients("sns")
        try:
            subs = c.list_subscriptions_by_topic(TopicArn=info["TopicArn"])["Subscriptions"]
        except c.exceptions.NotFoundException:
            return False  # its topic is gone, and with it every subscription
        return any(s["SubscriptionArn"] == ref for s in subs)

    def delete_subscription(self, ref, info):
        self.clients("sns").unsubscribe(SubscriptionArn=ref)


# What moto cannot delete: left on moto after `down`, reported as such.
UNDELETABLE = {"AWS::CloudFront::KeyGroup"}

# The types the gap filler creates, each with its filler's method name.
GAP_TYPES = {
    "AWS::ApiGatewayV2::Api": "api",
    "AWS::ApiGatewayV2::Stage": "stage",
    "AWS::ApiGatewayV2::Integration": "integration",
    "AWS::ApiGatewayV2::Route": "route",
    "AWS::CloudFront::Function": "cf_function",
    "AWS::CloudFront::Distribution": "distribution",
    "AWS::CloudFront::PublicKey": "public_key",
    "AWS::CloudFront::KeyGroup": "key_group",
    "AWS::CloudFront::OriginAccessControl": "origin_access",
    "AWS::CloudFront::ResponseHeadersPolicy": "headers_policy",
    "AWS::S3::BucketPolicy": "bucket_policy",
    "AWS::Lambda::EventInvokeConfig": "invoke_config",
    "AWS::CloudWatch::Alarm": "alarm",
    "AWS::SNS::Subscription": "subscription",
}
