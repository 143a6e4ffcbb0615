"""template.yaml as `sam deploy` hands it to CloudFormation: packaged (each
CodeUri an S3 object, as `sam package` writes it) and transformed by
aws-sam-translator, the SAM transform CloudFormation runs."""

import copy
import json
import os

from samcli.yamlhelper import yaml_parse
from samtranslator.translator.transform import transform

# CloudFormation's limit for an inline --template-body; larger goes through S3.
TEMPLATE_BODY_LIMIT = 51_200


class NoManagedPolicies:
    """The transform's managed-policy loader: the template names none."""

    def load(self):
        return {}


def load(path):
    """The template as SAM parses it (short-form intrinsics as Fn:: mappings)."""
    with open(path, encoding="utf-8") as f:
        return yaml_parse(f.read())


def packages(template):
    """Each function's package (its CodeUri, a directory) → the binary it runs."""
    out = {}
    for logical_id, res in template["Resources"].items():
        if res["Type"] == "AWS::Serverless::Function":
            binary = res.get("Metadata", {}).get("BuildProperties", {}).get("Binary")
            if not binary:
                raise SystemExit(f"{logical_id}: no Metadata.BuildProperties.Binary")
            out[logical_id] = (res["Properties"]["CodeUri"], binary)
    return out


def package(template, bucket, keys):
    """A copy with every function's CodeUri at s3://bucket/keys[logical_id]."""
    packaged = copy.deepcopy(template)
    for logical_id, key in keys.items():
        packaged["Resources"][logical_id]["Properties"]["CodeUri"] = f"s3://{bucket}/{key}"
    return packaged


def translate(packaged, parameters, region):
    """The SAM transform's output, as CloudFormation would create it."""
    saved = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = region
    try:
        return transform(copy.deepcopy(packaged), parameters, NoManagedPolicies())
    finally:
        if saved is None:
            del os.environ["AWS_DEFAULT_REGION"]
        else:
            os.environ["AWS_DEFAULT_REGION"] = saved


def size(template):
    """Bytes of the template as JSON (compact: the smallest it can be sent as)."""
    return len(json.dumps(template, separators=(",", ":")).encode())


def routes(transformed, resolver):
    """The HTTP API's routes under the conditions: RouteKey → function logical id,
    read from each Route's Target (integrations/${X}) and X's IntegrationUri."""
    resources = transformed["Resources"]
    out = {}
    for logical_id, res in resources.items():
        if res["Type"] != "AWS::ApiGatewayV2::Route" or not resolver.active(res):
            continue
        props = res["Properties"]
        target = props["Target"]["Fn::Sub"]
        if not (target.startswith("integrations/${") and target.endswith("}")):
            raise SystemExit(f"{logical_id}: Target {target!r} is not integrations/${{X}}")
        integration = resources[target[len("integrations/${"):-1]]
        uri = integration["Properties"]["IntegrationUri"]["Fn::GetAtt"]
        function = uri.split(".", 1)[0] if isinstance(uri, str) else uri[0]
        if resources[function]["Type"] != "AWS::Lambda::Function":
            raise SystemExit(f"{logical_id}: integration does not name a function")
        out[props["RouteKey"]] = function
    return out
