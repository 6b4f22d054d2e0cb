"""The offline preview: the program run under the Pulumi SDK's mocks."""
