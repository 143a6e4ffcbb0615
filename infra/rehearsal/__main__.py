"""infra/rehearse's command line."""

import argparse
import os
import sys
from pathlib import Path

from . import configs
from .gapfill import GapError
from .intrinsics import TemplateError
from .checks import Failed
from .properties import PropertyError
from .rehearse import down, up

HELP = """\
Rehearses `sam deploy` of template.yaml on moto's server, without an AWS account.

  infra/rehearse up --config guided|full|full-ssm --out DIR [--moto-url URL] [--template FILE]
  infra/rehearse down --out DIR [--keep-moto]

up: transforms template.yaml offline (aws-sam-translator, CodeUris pointed at
placeholder zips in a deployment bucket on moto), writes DIR/transformed.json,
switches moto's IAM enforcement on (its free calls make a deployer user with an
admin policy; everything else is signed as that user), creates what moto's
CloudFormation skips through the service APIs (the gap filler), creates the
stack with CreateStack (template through S3, as sam deploy sends a template over
51,200 bytes), reads every resource back, checks the outputs and the functions'
environments, and writes DIR/facts.json:
  moto {url, pid (when up started it)}, region, account, credentials (the deployer's),
  given (the parameters passed), archive_keys (slot -> the public key
  infra/archive-key printed, its store), archives (check_archives: delivery,
  signers, public_keys, key_group, origin_access_control, behaviours,
  bucket_policy, signing), stack_name, stack_id, outputs, table, bucket, retained, types, routes
  (RouteKey -> function logical id), functions (logical id -> name, arn, binary,
  role_arn, role_name, environment, timeout, memory; from the template:
  architectures, ephemeral_storage_mb, log_group), resources, gap_filled,
  filled_properties {set, not_held_by_moto, policies_without_version}, limits,
  policy_resources, lambda_stand_in (the ARN that may assume every function role,
  standing in for lambda.amazonaws.com), transformed {path, bytes (compact JSON),
  bytes_with_spaces, over_template_body_limit}.
  guided: the README's first deploy: `infra/archive-key new --stack STACK --slot A`
  first (its private key in SSM), its public key as ArchiveSigningPublicKeyA, else
  the template's defaults (ArchiveDelivery cloudfront), stack name and capabilities
  from samconfig.toml, region us-east-1 (or samconfig.toml's). full: sign-in (client
  secret in Secrets Manager), CI exchange, UpstreamConnectAllow, custom domain
  (certificate in us-east-1, hosted zone), archive keys in both slots (Secrets
  Manager, slot B signing: a rotation's middle), in eu-west-1. full-ssm: full with
  the client secret in SSM Parameter Store and ArchiveDelivery presigned.
  Without --moto-url, up starts moto_server (TFREG_MOTO_SERVER) detached and `down`
  stops it; with --moto-url (a test that owns moto), moto is the caller's.
down: deletes the gap filler's resources and the stack, then checks that exactly
the DeletionPolicy Retain resources remain (DIR/down.json: kept, deleted, and
left_on_moto: key groups, which moto 5.2.5 cannot delete).
Exit status 1 and a message on stderr when anything does not create, resolve or delete.
"""


def main():
    parser = argparse.ArgumentParser(prog="infra/rehearse", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="create the rehearsed stack and write DIR/facts.json")
    p_up.add_argument("--config", choices=sorted(configs.CONFIGS), required=True)
    p_up.add_argument("--out", required=True, help="directory for facts.json, transformed.json, moto.log")
    p_up.add_argument("--moto-url", help="a running moto server (else one is started)")
    p_up.add_argument("--region", help="override the configuration's region")
    p_up.add_argument("--template", help="another template than the repository's template.yaml (tests)")
    p_up.add_argument("--moto-server", default=os.environ.get("TFREG_MOTO_SERVER", "moto_server"))
    p_down = sub.add_parser("down", help="delete the stack in DIR/facts.json and check retention")
    p_down.add_argument("--out", required=True)
    p_down.add_argument("--keep-moto", action="store_true", help="leave a moto that up started running")
    args = parser.parse_args()
    repo = Path(__file__).resolve().parents[2]
    try:
        if args.command == "up":
            up(args, repo)
        else:
            down(args)
    except (Failed, GapError, PropertyError, TemplateError) as e:
        print(f"rehearse: FAILED: {e}", file=sys.stderr)
        sys.exit(1)


main()
