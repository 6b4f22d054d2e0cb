"""usage: s3-get.py REGION BUCKET KEY FILE  write object KEY of BUCKET to FILE

S3 GetObject with the EC2 instance's own role (IMDSv2), standard library only, Python
3.8+. The boot's user data carries it (through python_without_docs) to fetch what the
boot runs, before anything else is on the host: so it is short and self-contained, with
its own IMDSv2 client and SigV4 signer (ssm-parameter.py and s3-object.py share theirs).
FILE is replaced atomically: a temporary file beside it (mode 0600), renamed.
An instance's role may be refused for its first seconds (IAM is eventually consistent),
so a failed attempt is made again after 1, 2, 4... seconds, S3_GET_RETRY_SECONDS (60)
in all. The last failure is one line on stderr naming the object and AWS's error code
(AccessDenied, NoSuchKey) or the network error; never the credentials. Exit 1 on a
failure, 2 on a usage error. S3_ENDPOINT_URL (path style, e.g. http://127.0.0.1:5000)
and IMDS_ENDPOINT_URL override the endpoints (tests, VPC endpoints).
"""
# Optional inputs: IMDS_ENDPOINT_URL S3_ENDPOINT_URL S3_GET_RETRY_SECONDS

import hashlib
import hmac
import json
import os
import re
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

IMDS = os.environ.get("IMDS_ENDPOINT_URL", "http://169.254.169.254")
# A GET has an empty payload; S3 wants its hash signed and sent.
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def http(method, url, headers):
    request = urllib.request.Request(url, headers=headers, method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


def instance_credentials():
    """The role credentials IMDSv2 hands this instance."""
    token = http("PUT", IMDS + "/latest/api/token",
                 {"X-aws-ec2-metadata-token-ttl-seconds": "60"}).decode()

    def read(name):
        return http("GET", IMDS + "/latest/meta-data/iam/security-credentials/" + name,
                    {"X-aws-ec2-metadata-token": token}).decode()

    return json.loads(read(read("").split()[0]))


def _hmac(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signed_get(credentials, region, bucket, key, amz_date):
    """(URL, headers) of a GET of the object signed with AWS Signature Version 4 at
    amz_date (YYYYMMDDTHHMMSSZ): virtual-hosted style on AWS, path style on
    S3_ENDPOINT_URL."""
    quoted = urllib.parse.quote(key, safe="/-_.~")
    base = os.environ.get("S3_ENDPOINT_URL", "").rstrip("/")
    path = f"/{bucket}/{quoted}" if base else "/" + quoted
    base = base or f"https://{bucket}.s3.{region}.amazonaws.com"
    headers = {"host": urllib.parse.urlsplit(base).netloc,
               "x-amz-content-sha256": EMPTY_SHA256, "x-amz-date": amz_date}
    if credentials.get("Token"):
        headers["x-amz-security-token"] = credentials["Token"]
    names = sorted(headers)
    canonical = "\n".join(["GET", path, "", *(f"{name}:{headers[name]}" for name in names),
                           "", ";".join(names), EMPTY_SHA256])
    scope = f"{amz_date[:8]}/{region}/s3/aws4_request"
    # The signing key: the secret, then the date, region, service and "aws4_request".
    signing_key = ("AWS4" + credentials["SecretAccessKey"]).encode()
    for part in scope.split("/"):
        signing_key = _hmac(signing_key, part)
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={credentials['AccessKeyId']}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={_hmac(signing_key, to_sign).hex()}")
    return base + path, headers


def download(region, bucket, key, file):
    url, headers = signed_get(instance_credentials(), region, bucket, key,
                              time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    body = http("GET", url, headers)
    descriptor, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(file)))
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(body)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, file)
    except BaseException:
        os.unlink(temporary)
        raise


def main(argv):
    if len(argv) != 5:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    budget, wait, attempts = float(os.environ.get("S3_GET_RETRY_SECONDS", 60)), 1, 1
    while True:
        try:
            download(*argv[1:])
            return 0
        except urllib.error.HTTPError as error:
            # S3 names the error in its XML body; IMDS does not, its URL says what failed.
            code = re.search(rb"<Code>(\w+)</Code>", error.read())
            problem = f"HTTP {error.code} " + (code[1].decode() if code else error.filename)
        except Exception as error:
            problem = f"{type(error).__name__}: {error}"
        if budget <= 0:
            print(f"s3-get.py: s3://{argv[2]}/{argv[3]}: {problem} (attempt {attempts})",
                  file=sys.stderr)
            return 1
        time.sleep(min(wait, budget))
        budget, wait, attempts = budget - wait, wait * 2, attempts + 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
