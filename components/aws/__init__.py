"""The AWS side of the hybrid and cloud layouts: VPC, the EC2 control plane, EFS, GPU pools, boot and SSM."""
