"""AWS quotas CreateStack would hit in AWS that moto does not enforce,
checked on the transformed template with the configuration's values. Each
returns a list of problems (empty when within every limit)."""

import json
import re

# CloudFormation (docs: CloudFormation quotas).
MAX_RESOURCES = 500
MAX_OUTPUTS = 200
MAX_PARAMETERS = 200
MAX_TEMPLATE_URL_BYTES = 1_000_000
# Lambda: all environment variables together, and a description.
MAX_LAMBDA_ENV_BYTES = 4096
MAX_LAMBDA_DESCRIPTION = 256
# IAM: a role's inline policies together (whitespace not counted), its trust policy.
MAX_ROLE_INLINE_CHARS = 10_240
MAX_TRUST_POLICY_CHARS = 2048
# CloudFront Functions: code size and name.
MAX_CF_FUNCTION_BYTES = 10_240
CF_FUNCTION_NAME = re.compile(r"[a-zA-Z0-9-_]{1,64}")


def _chars_without_whitespace(doc):
    return len(re.sub(r"\s", "", json.dumps(doc)))


def template_limits(transformed, size):
    problems = []
    for section, most in (("Resources", MAX_RESOURCES), ("Outputs", MAX_OUTPUTS), ("Parameters", MAX_PARAMETERS)):
        n = len(transformed.get(section, {}))
        if n > most:
            problems.append(f"{n} {section}, CloudFormation takes at most {most}")
    if size > MAX_TEMPLATE_URL_BYTES:
        problems.append(f"template {size} bytes, over CloudFormation's {MAX_TEMPLATE_URL_BYTES} through S3")
    return problems


def resource_limits(lid, rtype, props):
    """`props`: the resource's properties evaluated under the configuration."""
    problems = []
    if rtype == "AWS::Lambda::Function":
        env = props.get("Environment", {}).get("Variables", {})
        n = sum(len(k.encode()) + len(str(v).encode()) for k, v in env.items())
        if n > MAX_LAMBDA_ENV_BYTES:
            problems.append(f"{lid}: environment {n} bytes, Lambda takes {MAX_LAMBDA_ENV_BYTES}")
        if len(props.get("Description", "")) > MAX_LAMBDA_DESCRIPTION:
            problems.append(f"{lid}: Description over {MAX_LAMBDA_DESCRIPTION} characters")
    elif rtype == "AWS::IAM::Role":
        inline = sum(_chars_without_whitespace(p["PolicyDocument"]) for p in props.get("Policies", []))
        if inline > MAX_ROLE_INLINE_CHARS:
            problems.append(f"{lid}: inline policies {inline} characters, IAM takes {MAX_ROLE_INLINE_CHARS}")
        trust = _chars_without_whitespace(props.get("AssumeRolePolicyDocument", {}))
        if trust > MAX_TRUST_POLICY_CHARS:
            problems.append(f"{lid}: trust policy {trust} characters, IAM takes {MAX_TRUST_POLICY_CHARS}")
    elif rtype == "AWS::CloudFront::Function":
        code = len(props.get("FunctionCode", "").encode())
        if code > MAX_CF_FUNCTION_BYTES:
            problems.append(f"{lid}: code {code} bytes, CloudFront Functions take {MAX_CF_FUNCTION_BYTES}")
        if not CF_FUNCTION_NAME.fullmatch(props.get("Name", "")):
            problems.append(f"{lid}: Name {props.get('Name')!r} is not [a-zA-Z0-9-_]{{1,64}}")
    return problems


def sizes(lid, rtype, props):
    """The figures behind the limits, for the facts (how close each is)."""
    if rtype == "AWS::Lambda::Function":
        env = props.get("Environment", {}).get("Variables", {})
        return {"environment_bytes": sum(len(k.encode()) + len(str(v).encode()) for k, v in env.items())}
    if rtype == "AWS::IAM::Role":
        return {"inline_policy_chars": sum(_chars_without_whitespace(p["PolicyDocument"])
                                           for p in props.get("Policies", []))}
    if rtype == "AWS::CloudFront::Function":
        return {"code_bytes": len(props.get("FunctionCode", "").encode())}
    return None
