"""The resource types moto's CloudFormation creates itself, each with how the
rehearsal reads it back through its service API: `exists` (is it there?) and
`attrs` (the attributes a GetAtt may ask for). A type in neither this list nor
gapfill.GAP_TYPES fails the rehearsal before anything is created."""

import json


def _missing(e):
    err = e.response.get("Error", {})
    code = err.get("Code", "")
    status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status == 404 or "NotFound" in code or "NoSuch" in code or code == "404"


def _probe(fn):
    from botocore.exceptions import ClientError

    try:
        fn()
        return True
    except ClientError as e:
        if _missing(e):
            return False
        raise


class Stacked:
    """Reads a stack's resources back; `clients(service)` as in gapfill."""

    def __init__(self, clients, region, account):
        self.clients = clients
        self.region = region
        self.account = account

    # -------------------------------------------------------------- tables
    def table_exists(self, name, props):
        c = self.clients("dynamodb")
        return _probe(lambda: c.describe_table(TableName=name))

    def table_attrs(self, name):
        t = self.clients("dynamodb").describe_table(TableName=name)["Table"]
        return {"Arn": t["TableArn"], "StreamArn": t.get("LatestStreamArn", "")}

    # -------------------------------------------------------------- buckets
    def bucket_exists(self, name, props):
        c = self.clients("s3")
        return _probe(lambda: c.head_bucket(Bucket=name))

    def bucket_attrs(self, name):
        return {
            "Arn": f"arn:aws:s3:::{name}",
            "DomainName": f"{name}.s3.amazonaws.com",
            "RegionalDomainName": f"{name}.s3.{self.region}.amazonaws.com",
        }

    # -------------------------------------------------------------- roles
    def role_exists(self, name, props):
        c = self.clients("iam")
        return _probe(lambda: c.get_role(RoleName=name))

    def role_attrs(self, name):
        role = self.clients("iam").get_role(RoleName=name)["Role"]
        return {"Arn": role["Arn"], "RoleId": role["RoleId"]}

    # -------------------------------------------------------------- functions
    def function_exists(self, name, props):
        c = self.clients("lambda")
        return _probe(lambda: c.get_function(FunctionName=name))

    def function_attrs(self, name):
        conf = self.clients("lambda").get_function_configuration(FunctionName=name)
        return {"Arn": conf["FunctionArn"]}

    def permission_exists(self, ref, props):
        """Its statement is in the function's resource policy (moto gives a
        permission a uuid as its physical id)."""
        c = self.clients("lambda")
        try:
            policy = json.loads(c.get_policy(FunctionName=props["FunctionName"])["Policy"])
        except c.exceptions.ResourceNotFoundException:
            return False
        for st in policy.get("Statement", []):
            principal = st.get("Principal")
            principal = principal.get("Service") if isinstance(principal, dict) else principal
            arn = st.get("SourceArn") or st.get("Condition", {}).get("ArnLike", {}).get("AWS:SourceArn")
            if principal == props["Principal"] and arn == props.get("SourceArn", arn):
                return True
        return False

    # -------------------------------------------------------------- logs
    def log_group_exists(self, name, props):
        groups = self.clients("logs").describe_log_groups(logGroupNamePrefix=name)["logGroups"]
        return any(g["logGroupName"] == name for g in groups)

    def log_group_attrs(self, name):
        groups = self.clients("logs").describe_log_groups(logGroupNamePrefix=name)["logGroups"]
        arn = next(g["arn"] for g in groups if g["logGroupName"] == name)
        return {"Arn": arn if arn.endswith(":*") else arn + ":*"}

    # -------------------------------------------------------------- DNS
    def record_exists(self, ref, props):
        c = self.clients("route53")
        name = props["Name"].rstrip(".")
        try:
            sets = c.list_resource_record_sets(HostedZoneId=props["HostedZoneId"])["ResourceRecordSets"]
        except c.exceptions.NoSuchHostedZone:
            return False
        # moto keeps a record's name as given, without the final dot.
        return any(s["Name"].rstrip(".") == name and s["Type"] == props["Type"] for s in sets)

    # -------------------------------------------------------------- metrics (issue 38)
    def topic_exists(self, arn, props):
        c = self.clients("sns")
        return _probe(lambda: c.get_topic_attributes(TopicArn=arn))

    def topic_attrs(self, arn):
        return {"TopicArn": arn, "TopicName": arn.rsplit(":", 1)[-1]}

    def dashboard_exists(self, name, props):
        """There, with the template's body (moto's CloudFormation stores it)."""
        c = self.clients("cloudwatch")
        try:
            got = c.get_dashboard(DashboardName=name)
        except c.exceptions.ResourceNotFound:
            return False
        return json.loads(got["DashboardBody"]) == json.loads(props["DashboardBody"])


# type → (exists method, attrs method or None: no GetAtt expected)
CFN_TYPES = {
    "AWS::DynamoDB::Table": ("table_exists", "table_attrs"),
    "AWS::S3::Bucket": ("bucket_exists", "bucket_attrs"),
    "AWS::IAM::Role": ("role_exists", "role_attrs"),
    "AWS::Lambda::Function": ("function_exists", "function_attrs"),
    "AWS::Lambda::Permission": ("permission_exists", None),
    "AWS::Logs::LogGroup": ("log_group_exists", "log_group_attrs"),
    "AWS::Route53::RecordSet": ("record_exists", None),
    "AWS::SNS::Topic": ("topic_exists", "topic_attrs"),
    "AWS::CloudWatch::Dashboard": ("dashboard_exists", None),
}

# Types moto's CloudFormation lists without a physical id (found by the
# properties instead: a permission by its function's resource policy).
NO_PHYSICAL_ID = {"AWS::Lambda::Permission"}
