"""A user's kubeconfig from the SSM SecureString the program stores it in (AWS layouts),
read with the user's own AWS credentials."""

import os
from typing import Optional

from distribute import DistributeError, InputError


def fetch_parameter(name: str, region: Optional[str], profile: Optional[str]) -> str:
    """The decrypted value of a SecureString parameter."""
    try:
        import boto3
        import botocore.exceptions as aws_errors
    except ImportError:
        raise DistributeError("fetch needs boto3: pip install -r requirements.txt") from None
    # AWS_REGION as the AWS CLI reads it; boto3 reads AWS_DEFAULT_REGION and the profile.
    region = region or os.environ.get("AWS_REGION") or None
    try:
        session = boto3.session.Session(profile_name=profile, region_name=region)
    except aws_errors.ProfileNotFound:
        raise InputError(f"AWS profile '{profile}' is not configured") from None
    if session.region_name is None:
        raise InputError("no AWS region: pass --region (the stack's aws.region) or set "
                         "AWS_REGION or AWS_DEFAULT_REGION")
    where = f"SSM parameter '{name}' in {session.region_name}"
    try:
        client = session.client("ssm")
        answer = client.get_parameter(Name=name, WithDecryption=True)
    except aws_errors.NoCredentialsError:
        raise DistributeError(f"no AWS credentials to read {where}: configure your own "
                              "(aws configure, AWS_PROFILE or --profile)") from None
    except aws_errors.ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        if code == "ParameterNotFound":
            raise DistributeError(f"{where} does not exist: check the name "
                                  "(stack output userKubeconfigParameters) and the region"
                                  ) from None
        if code in ("AccessDeniedException", "AccessDenied"):
            raise DistributeError(f"access denied to {where}: your AWS identity needs "
                                  "ssm:GetParameter on it and kms:Decrypt on its key") from None
        message = error.response.get("Error", {}).get("Message", "")
        raise DistributeError(f"cannot read {where}: {code} {message}".strip()) from None
    except aws_errors.BotoCoreError as error:
        raise DistributeError(f"cannot read {where}: {error}") from None
    parameter = answer.get("Parameter", {})
    if parameter.get("Type") != "SecureString":
        # The program stores kubeconfigs as SecureStrings only; anything else is not ours.
        raise DistributeError(f"{where} is a {parameter.get('Type')}, not a SecureString; "
                              "not using it")
    return parameter.get("Value", "")
