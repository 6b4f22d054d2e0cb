"""usage: s3-object.py put REGION BUCKET KEY FILE   upload FILE as object KEY

S3 PutObject with the EC2 instance's own role (IMDSv2), standard library only: images that
run our steps have python3, not the AWS CLI. The role's credentials, the HTTP calls and the SigV4
signer are ssm-parameter.py's (the copy the instance's boot keeps, or SSM_CLIENT): one
client of the instance metadata service and one signer. The bucket encrypts the object (its default encryption); with
versioning on, a PUT to the same key adds a version. It sends Content-MD5, which S3 requires
of every PUT to a bucket with an Object Lock retention (the backups' bucket:
https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-lock-managing.html,
"Using Object Lock with Content-MD5"). Errors go to stderr (AWS's error
body names the problem). Exit 1 on any failure, 2 on a usage error. S3_ENDPOINT_URL
(path-style, e.g. http://127.0.0.1:5000) overrides the endpoint (tests, VPC endpoints).
"""
# Optional inputs: S3_ENDPOINT_URL SSM_CLIENT

import base64
import datetime
import hashlib
import importlib.util
import os
import sys
import urllib.parse

SSM_CLIENT = os.environ.get("SSM_CLIENT", "/var/lib/gpu-cluster/boot/ssm-parameter.py")


def ssm_client():
    """ssm-parameter.py as a module."""
    spec = importlib.util.spec_from_file_location("ssm_parameter", SSM_CLIENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def object_url(region, bucket, key):
    """(URL, host, path) of object KEY: virtual-hosted style on AWS, path style on an
    endpoint given in S3_ENDPOINT_URL."""
    quoted = urllib.parse.quote(key, safe="/-_.~")
    endpoint = os.environ.get("S3_ENDPOINT_URL")
    if endpoint:
        path = f"/{bucket}/{quoted}"
        base = endpoint.rstrip("/")
    else:
        path = f"/{quoted}"
        base = f"https://{bucket}.s3.{region}.amazonaws.com"
    return base + path, urllib.parse.urlsplit(base).netloc, path


def signed_put_headers(client, credentials, region, host, path, body, now, content_md5=None):
    """AWS Signature Version 4 headers of an S3 PUT of `body` to `path` (no query), signed by
    `client` (ssm-parameter.py's sigv4); `content_md5` the body's MD5, base64 (signed with
    the rest)."""
    # urllib would send a PUT's body as a form (application/x-www-form-urlencoded).
    headers = {"content-type": "application/octet-stream",
               "x-amz-content-sha256": hashlib.sha256(body).hexdigest()}
    if content_md5:
        headers["content-md5"] = content_md5
    return client.sigv4(credentials, region, "s3", host, headers, body, now,
                        method="PUT", path=path)


def put(region, bucket, key, file):
    client = ssm_client()
    with open(file, "rb") as stream:
        body = stream.read()
    url, host, path = object_url(region, bucket, key)
    headers = signed_put_headers(
        client, client.instance_credentials(), region, host, path, body,
        datetime.datetime.now(datetime.timezone.utc),
        base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode())
    try:
        client.http("PUT", url, headers, body)
    except client.HttpError as error:
        raise OSError(str(error)) from None


def main(argv):
    if len(argv) != 6 or argv[1] != "put":
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    try:
        put(*argv[2:])
    except (OSError, ValueError, KeyError, IndexError) as error:
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
