"""What AWS would answer, for the offline preview: look-ups (availability zones, the
Ubuntu image) and the outputs AWS assigns to new resources (ids, the Elastic IP).
Addresses come from the documentation range 203.0.113.0/24 so nothing real is named."""

import hashlib
from typing import Any, Optional

# Resource type -> the id prefix AWS uses.
_ID_PREFIXES = {
    "aws:ec2/vpc:Vpc": "vpc",
    "aws:ec2/subnet:Subnet": "subnet",
    "aws:ec2/internetGateway:InternetGateway": "igw",
    "aws:ec2/routeTable:RouteTable": "rtb",
    "aws:ec2/securityGroup:SecurityGroup": "sg",
    "aws:ec2/instance:Instance": "i",
    "aws:ec2/eip:Eip": "eipalloc",
    "aws:ec2/keyPair:KeyPair": "key",
    "aws:efs/fileSystem:FileSystem": "fs",
    "aws:efs/mountTarget:MountTarget": "fsmt",
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": "sgr",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": "sgr",
}


# The account and region ARNs name in the preview.
PREVIEW_ACCOUNT = "000000000000"
PREVIEW_REGION = "preview-region-1"


def _hex(name: str, length: int = 17) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:length]


def resource(type_: str, name: str, inputs: dict) -> Optional[tuple[str, dict[str, Any]]]:
    """(id, outputs) for an AWS resource, or None for other providers' resources."""
    if not type_.startswith("aws:"):
        return None
    resource_id = f"{_ID_PREFIXES.get(type_, 'res')}-{_hex(name)}"
    outputs = {**inputs, "id": resource_id, "arn": f"arn:aws:preview::{resource_id}"}
    if type_ == "aws:ec2/instance:Instance":
        outputs["primaryNetworkInterfaceId"] = f"eni-{_hex(name + '-eni')}"
    elif type_ == "aws:ec2/eip:Eip":
        outputs["publicIp"] = f"203.0.113.{10 + int(_hex(name, 2), 16) % 200}"
    elif type_ == "aws:ec2/keyPair:KeyPair":
        # A new public key is a new key pair (public_key forces replacement), which the
        # provider names anew: the name follows the key.
        outputs.setdefault("keyName", f"{name}-{_hex(str(inputs.get('publicKey')), 7)}")
    elif type_ == "aws:ssm/parameter:Parameter":
        # arn:aws:ssm:REGION:ACCOUNT:parameter/NAME, as AWS forms it.
        outputs["arn"] = f"arn:aws:ssm:{PREVIEW_REGION}:{PREVIEW_ACCOUNT}:parameter{inputs['name']}"
    elif type_ == "aws:s3/bucket:Bucket":
        # S3 names a bucket from its prefix and a unique suffix of 26 characters.
        outputs["bucket"] = inputs.get("bucket") or f"{inputs.get('bucketPrefix', '')}{_hex(name, 26)}"
        outputs["arn"] = f"arn:aws:s3:::{outputs['bucket']}"
    elif type_ == "aws:iam/role:Role":
        outputs["arn"] = f"arn:aws:iam::{PREVIEW_ACCOUNT}:role/{name}-{_hex(name, 7)}"
    elif type_ == "aws:iam/openIdConnectProvider:OpenIdConnectProvider":
        # Named by the issuer's host and path, as IAM names a provider.
        outputs["arn"] = (f"arn:aws:iam::{PREVIEW_ACCOUNT}:oidc-provider/"
                          f"{inputs['url'].removeprefix('https://')}")
    elif type_ == "aws:kms/key:Key":
        outputs["keyId"] = f"{_hex(name, 8)}-0000-4000-8000-{_hex(name + '-key', 12)}"
        outputs["arn"] = f"arn:aws:kms:{PREVIEW_REGION}:{PREVIEW_ACCOUNT}:key/{outputs['keyId']}"
    elif type_ == "aws:lb/loadBalancer:LoadBalancer":
        # A network load balancer's name is its prefix and a unique suffix; its DNS name
        # NAME-ID.elb.REGION.amazonaws.com.
        outputs["name"] = f"{inputs.get('namePrefix', '')}{_hex(name, 10)}"
        outputs["dnsName"] = (f"{outputs['name']}-{_hex(name + '-dns', 16)}.elb."
                              f"{PREVIEW_REGION}.amazonaws.com")
    elif type_ == "aws:efs/fileSystem:FileSystem":
        outputs["dnsName"] = f"{resource_id}.efs.preview.amazonaws.com"
        outputs["arn"] = (f"arn:aws:elasticfilesystem:{PREVIEW_REGION}:{PREVIEW_ACCOUNT}:"
                          f"file-system/{resource_id}")
    return resource_id, outputs


def invoke(token: str, args: dict) -> Optional[dict]:
    if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
        names = [f"preview-zone-{letter}" for letter in "abcdef"]
        return {"id": "preview", "names": names, "zoneIds": [f"pz-{n}" for n in range(6)]}
    if token == "aws:index/getCallerIdentity:getCallerIdentity":
        return {"id": PREVIEW_ACCOUNT, "accountId": PREVIEW_ACCOUNT, "userId": "PREVIEW",
                "arn": f"arn:aws:iam::{PREVIEW_ACCOUNT}:user/preview"}
    if token == "aws:ec2/getAmi:getAmi":
        return {"id": "ami-0000000000preview", "name": "ubuntu-noble-24.04 (offline preview)",
                "architecture": "x86_64"}
    return None
