"""The CEL rules (x-kubernetes-validations) of the Kueue CRDs the queues use, which the API
server runs and jsonschema cannot: each rule's text as the pinned chart's CRD has it, with
its meaning in Python. The test holds the table to the CRDs, so a rule added upstream fails
it until it is read and added here. Transition rules (oldSelf) are run as on an update that
changes nothing, the most `pulumi up` does to an unchanged object."""

# (kind, path of the schema node, rule) -> what it requires of the node's value.
RULES = {
    ("ResourceFlavor", ".spec", "!has(self.topologyName) || self.nodeLabels.size() >= 1"):
        lambda s: "topologyName" not in s or len(s.get("nodeLabels", {})) >= 1,
    ("ResourceFlavor", ".spec", "!has(oldSelf.topologyName) || (has(self.nodeLabels) == "
     "has(oldSelf.nodeLabels) && (!has(self.nodeLabels) || self.nodeLabels == "
     "oldSelf.nodeLabels))"): lambda s: True,
    ("ResourceFlavor", ".spec", "!has(oldSelf.topologyName) || (has(self.tolerations) == "
     "has(oldSelf.tolerations) && (!has(self.tolerations) || self.tolerations == "
     "oldSelf.tolerations))"): lambda s: True,
    ("ResourceFlavor", ".spec", "!has(oldSelf.topologyName) || (has(self.topologyName) && "
     "self.topologyName == oldSelf.topologyName)"): lambda s: True,
    ("ResourceFlavor", ".spec.nodeTaints",
     "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"):
        lambda s: all(x["effect"] in ("NoSchedule", "PreferNoSchedule", "NoExecute") for x in s),
    ("ResourceFlavor", ".spec.tolerations",
     "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)"):
        lambda s: all("key" in x or x.get("operator") == "Exists" for x in s),
    ("ResourceFlavor", ".spec.tolerations",
     "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)"):
        lambda s: all("tolerationSeconds" not in x or x.get("effect") == "NoExecute" for x in s),
    ("ResourceFlavor", ".spec.tolerations",
     "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])"):
        lambda s: all(x.get("operator", "Equal") in ("Equal", "Exists") for x in s),
    ("ResourceFlavor", ".spec.tolerations",
     "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)"):
        lambda s: all(x.get("operator") != "Exists" or "value" not in x for x in s),
    ("ResourceFlavor", ".spec.tolerations", "self.all(x, !has(x.effect) || x.effect in "
     "['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"):
        lambda s: all(x.get("effect", "NoSchedule") in ("NoSchedule", "PreferNoSchedule",
                                                        "NoExecute") for x in s),
    ("ClusterQueue", ".spec", "!has(self.cohortName) && has(self.resourceGroups) ? "
     "self.resourceGroups.all(rg, rg.flavors.all(f, f.resources.all(r, "
     "!has(r.borrowingLimit)))) : true"):
        lambda s: "cohortName" in s or all("borrowingLimit" not in r
                                           for g in s.get("resourceGroups", [])
                                           for f in g["flavors"] for r in f["resources"]),
    ("ClusterQueue", ".spec.flavorFungibility", "!has(self.preference) || (self.whenCanBorrow "
     "== 'TryNextFlavor' && self.whenCanPreempt == 'TryNextFlavor')"):
        lambda s: "preference" not in s or (s.get("whenCanBorrow") == "TryNextFlavor"
                                            and s.get("whenCanPreempt") == "TryNextFlavor"),
    ("ClusterQueue", ".spec.preemption", "!(self.reclaimWithinCohort == 'Never' && "
     "has(self.borrowWithinCohort) &&  self.borrowWithinCohort.policy != 'Never')"):
        lambda s: not (s.get("reclaimWithinCohort", "Never") == "Never"
                       and "borrowWithinCohort" in s
                       and s["borrowWithinCohort"].get("policy") != "Never"),
    ("ClusterQueue", ".spec.resourceGroups[]",
     "self.flavors.all(x, size(x.resources) == size(self.coveredResources))"):
        lambda s: all(len(x["resources"]) == len(s["coveredResources"]) for x in s["flavors"]),
    ("AdmissionCheck", ".spec.controllerName", "self == oldSelf"): lambda s: True,
    ("LocalQueue", ".spec.clusterQueue", "self == oldSelf"): lambda s: True,
}


def schema_rules(schema: dict, path: str = "") -> list[tuple[str, str]]:
    """(path, rule) of every CEL rule in an openAPIV3Schema."""
    found = [(path, rule["rule"]) for rule in schema.get("x-kubernetes-validations", [])]
    for key, child in schema.get("properties", {}).items():
        found += schema_rules(child, f"{path}.{key}")
    if isinstance(schema.get("items"), dict):
        found += schema_rules(schema["items"], f"{path}[]")
    return found


def values_at(obj, path: str) -> list:
    """The values at a schema path (`.spec.resourceGroups[]`) in an object; none where
    the object leaves it out (a rule on an absent field is not run)."""
    values = [obj]
    for part in filter(None, path.replace("[]", ".[]").split(".")):
        if part == "[]":
            values = [item for value in values for item in value]
        else:
            values = [value[part] for value in values if part in value]
    return values


def violations(kind: str, obj: dict, rules: list[tuple[str, str]]) -> list[str]:
    """The rules of the CRD `obj` breaks; a rule not in RULES is an error of its own."""
    broken = []
    for path, rule in rules:
        check = RULES.get((kind, path, rule))
        if check is None:
            broken.append(f"{path}: rule not read yet: {rule}")
            continue
        broken += [f"{path}: {rule}" for value in values_at(obj, path) if not check(value)]
    return broken
