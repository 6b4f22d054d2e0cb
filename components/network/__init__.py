"""The site-to-site OpenVPN bridge between the VPC and the on-prem LAN."""
