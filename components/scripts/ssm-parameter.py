"""Prints one SSM Parameter Store value (SecureStrings decrypted) using the EC2 instance's
own role, with nothing but the Python standard library: cloud-init needs python3, so
every image that boots our user data has it, while the AWS CLI is not on stock images.

Usage: python3 ssm-parameter.py REGION NAME
The value goes to stdout only; errors to stderr, without it. Exit 1 on any failure.
SSM_ENDPOINT_URL and IMDS_ENDPOINT_URL override the AWS endpoints (tests, VPC endpoints).
"""

import datetime
import hashlib
import hmac
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

IMDS = os.environ.get("IMDS_ENDPOINT_URL", "http://169.254.169.254")
TIMEOUT_SECONDS = 10


def http(method, url, headers=None, body=None):
    request = urllib.request.Request(url, data=body, headers=headers or {}, method=method)
    with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
        return response.read().decode()


def instance_credentials():
    """The role credentials IMDSv2 hands this instance."""
    token = http("PUT", f"{IMDS}/latest/api/token",
                 {"X-aws-ec2-metadata-token-ttl-seconds": "60"})
    headers = {"X-aws-ec2-metadata-token": token}
    base = f"{IMDS}/latest/meta-data/iam/security-credentials/"
    role = http("GET", base, headers).split()[0]
    return json.loads(http("GET", base + role, headers))


def _hmac(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signed_headers(credentials, region, host, target, body, now):
    """AWS Signature Version 4 headers for a JSON POST to `/` of the SSM API."""
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    date = amz_date[:8]
    headers = {
        "content-type": "application/x-amz-json-1.1",
        "host": host,
        "x-amz-date": amz_date,
        "x-amz-target": target,
    }
    if credentials.get("Token"):
        headers["x-amz-security-token"] = credentials["Token"]
    names = sorted(headers)
    canonical = "\n".join([
        "POST", "/", "",
        "".join(f"{name}:{headers[name]}\n" for name in names),
        ";".join(names),
        hashlib.sha256(body).hexdigest(),
    ])
    scope = f"{date}/{region}/ssm/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(("AWS4" + credentials["SecretAccessKey"]).encode(), date)
    for part in (region, "ssm", "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={credentials['AccessKeyId']}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}")
    return headers


def get_parameter(region, name, credentials, now=None):
    endpoint = os.environ.get("SSM_ENDPOINT_URL", f"https://ssm.{region}.amazonaws.com")
    host = urllib.parse.urlsplit(endpoint).netloc
    body = json.dumps({"Name": name, "WithDecryption": True}).encode()
    headers = signed_headers(credentials, region, host, "AmazonSSM.GetParameter", body,
                             now or datetime.datetime.now(datetime.timezone.utc))
    return json.loads(http("POST", endpoint + "/", headers, body))["Parameter"]["Value"]


def main(argv):
    if len(argv) != 3:
        print("usage: ssm-parameter.py REGION NAME", file=sys.stderr)
        return 2
    region, name = argv[1:]
    try:
        value = get_parameter(region, name, instance_credentials())
    except urllib.error.HTTPError as error:
        # AWS's error body names the problem (AccessDenied, ParameterNotFound), never the value.
        print(f"HTTP {error.code}: {error.read().decode(errors='replace')}", file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError, IndexError) as error:
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return 1
    sys.stdout.write(value)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
