# shellcheck shell=bash disable=SC2034 # the suites that load this file read these
# What both distributions' controller installs (k0s/install-controller.sh,
# rke2/install-server.sh) are given by the program: the cluster CA, whose key is a fake
# whose body the tests look for in logs, and the API server's admission and audit files.

CA_CERT='-----BEGIN CERTIFICATE-----
MIIBhTCCASugAwIBAgIUgpu-cluster-ca
-----END CERTIFICATE-----'
CA_KEY_SECRET='MHcCAQEEIA-secret-ca-key-0123456789'
CA_KEY="-----BEGIN EC PRIVATE KEY-----
$CA_KEY_SECRET
-----END EC PRIVATE KEY-----"
ADMISSION_CONFIG='apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration'
AUDIT_POLICY='apiVersion: audit.k8s.io/v1
kind: Policy'
