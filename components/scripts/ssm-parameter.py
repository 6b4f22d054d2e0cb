"""usage: ssm-parameter.py get REGION NAME        print its value (SecureStrings decrypted)
       ssm-parameter.py put REGION NAME VALUE  store VALUE as a String, overwriting
       ssm-parameter.py put-secret REGION NAME store stdin as a SecureString, overwriting
       ssm-parameter.py delete REGION NAME     delete it; a missing one counts as deleted
       ssm-parameter.py instance-id            print this instance's id
       ssm-parameter.py provider-id            print its Kubernetes providerID, aws:///ZONE/ID

SSM Parameter Store with the EC2 instance's own role (IMDSv2), standard library only,
Python 3.8+: images that boot our user data have python3 (cloud-init), not the AWS CLI.
put's VALUE is on the command line, readable by any process on the host: never a secret.
stdout gets the value or id alone (no newline); errors go to stderr without it (AWS's
error body names the problem). Exit 1 on any failure, 2 on a usage error.
SSM_ENDPOINT_URL and IMDS_ENDPOINT_URL override the endpoints (tests, VPC endpoints).
"""
# Optional inputs: IMDS_ENDPOINT_URL SSM_ENDPOINT_URL

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


class HttpError(Exception):
    pass


def http(method, url, headers=None, body=None):
    request = urllib.request.Request(url, data=body, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            return response.read().decode()
    except urllib.error.HTTPError as error:
        # AWS's error body names the error (AccessDenied, ParameterNotFound), never a value.
        body = error.read().decode(errors="replace")
        raise HttpError(f"HTTP {error.code}: {body or url}") from None


def metadata():
    """A reader of IMDSv2 metadata paths, holding one session token."""
    token = http("PUT", f"{IMDS}/latest/api/token",
                 {"X-aws-ec2-metadata-token-ttl-seconds": "60"})
    return lambda path: http("GET", f"{IMDS}/latest/meta-data/{path}",
                             {"X-aws-ec2-metadata-token": token})


def instance_credentials():
    """The role credentials IMDSv2 hands this instance."""
    read = metadata()
    role = read("iam/security-credentials/").split()[0]
    return json.loads(read("iam/security-credentials/" + role))


def _hmac(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sigv4(credentials, region, service, host, headers, body, now, method="POST", path="/"):
    """`headers` with AWS Signature Version 4 added for a `method` request of `body` to
    `path` (URI-encoded, no query) of `service`: the one signer of the instance's clients
    (this client's SSM calls, the EC2 reads of ec2-instances.py, s3-object.py's PUT; only
    boot/s3-get.py, which the user data carries alone, has its own). The canonical request
    and signing key as in https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html;
    an S3 request also sends the payload's hash as x-amz-content-sha256 in `headers`."""
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    date = amz_date[:8]
    headers = {**headers, "host": host, "x-amz-date": amz_date}
    if credentials.get("Token"):
        headers["x-amz-security-token"] = credentials["Token"]
    names = sorted(headers)
    canonical = "\n".join([
        method, path, "",
        "".join(f"{name}:{headers[name]}\n" for name in names),
        ";".join(names),
        hashlib.sha256(body).hexdigest(),
    ])
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(("AWS4" + credentials["SecretAccessKey"]).encode(), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={credentials['AccessKeyId']}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}")
    return headers


def signed_headers(credentials, region, host, action, body, now):
    """AWS Signature Version 4 headers for a JSON POST of `action` to `/` of the SSM API."""
    return sigv4(credentials, region, "ssm", host, {
        "content-type": "application/x-amz-json-1.1",
        "x-amz-target": "AmazonSSM." + action,
    }, body, now)


def call_ssm(region, action, request):
    """One SSM API call with the instance's credentials; AWS's answer."""
    endpoint = os.environ.get("SSM_ENDPOINT_URL", f"https://ssm.{region}.amazonaws.com")
    host = urllib.parse.urlsplit(endpoint).netloc
    body = json.dumps(request).encode()
    headers = signed_headers(instance_credentials(), region, host, action, body,
                             datetime.datetime.now(datetime.timezone.utc))
    return json.loads(http("POST", endpoint + "/", headers, body))


def get(region, name):
    answer = call_ssm(region, "GetParameter", {"Name": name, "WithDecryption": True})
    return answer["Parameter"]["Value"]


def put(region, name, value):
    call_ssm(region, "PutParameter",
             {"Name": name, "Value": value, "Type": "String", "Overwrite": True})
    return ""


def put_secret(region, name):
    """Overwrites the SecureString `name` with stdin (without its last newline): a secret
    never goes on a command line."""
    value = sys.stdin.read().rstrip("\n")
    if not value:
        raise ValueError("no value on stdin")
    call_ssm(region, "PutParameter",
             {"Name": name, "Value": value, "Type": "SecureString", "Overwrite": True})
    return ""


def delete(region, name):
    try:
        call_ssm(region, "DeleteParameter", {"Name": name})
    except HttpError as error:
        # {"__type":"ParameterNotFound"}, the type maybe after a "namespace#".
        if 'ParameterNotFound"' not in str(error):
            raise
    return ""


def instance_id():
    return metadata()("instance-id")


def provider_id():
    """The providerID cloud-provider-aws reads back: aws:///<zone>/<instance id>
    (kubernetes/cloud-provider-aws v1.35.2 pkg/providers/v1/instances.go:52-91,
    KubernetesInstanceID; aws.go:973-988 InstanceID builds the same)."""
    read = metadata()
    return f"aws:///{read('placement/availability-zone')}/{read('instance-id')}"


# Each action and how many arguments it takes.
ACTIONS = {"get": (get, 2), "put": (put, 3), "put-secret": (put_secret, 2),
           "delete": (delete, 2),
           "instance-id": (instance_id, 0), "provider-id": (provider_id, 0)}


def main(argv):
    action, arity = ACTIONS.get(argv[1] if len(argv) > 1 else "", (None, 0))
    if action is None or len(argv) != 2 + arity:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    try:
        output = action(*argv[2:])
    except HttpError as error:
        print(error, file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError, IndexError) as error:
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return 1
    sys.stdout.write(output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
