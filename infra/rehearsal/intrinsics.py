"""CloudFormation's intrinsic functions, evaluated here for what moto's
CloudFormation does not create (the gap filler's resources) and for the
references the stack's own resources make to them.

`Resolver.value(node)` evaluates a node to a concrete value; a reference the
resolver cannot answer (a resource not created yet, a pseudo parameter not
known yet) raises `Unresolved`, never a silent None.
"""

import re

from .gapfill import LATE

NO_VALUE = object()  # AWS::NoValue: the property is left out

SUB_VAR = re.compile(r"\$\{(?!!)([^}]+)\}")


class Unresolved(Exception):
    """A reference with no value yet (the name is the logical id or pseudo parameter)."""


class TemplateError(Exception):
    """Something in the template this evaluator does not know: fail loudly."""


class Resolver:
    """Evaluates nodes against parameters, pseudo parameters, conditions and
    the resources created so far (`refs[logical_id]`, `attrs[(logical_id, attr)]`)."""

    def __init__(self, template, parameters, pseudo):
        self.template = template
        self.parameters = parameters
        self.pseudo = pseudo
        self.refs = {}
        self.attrs = {}
        self.conditions = {}
        # Stack resources whose values are `late` (gapfill.LATE) while a gap
        # resource made before the stack, without them, is evaluated.
        self.late = set()
        for name in template.get("Conditions", {}):
            self.condition(name)

    def condition(self, name):
        if name not in self.conditions:
            self.conditions[name] = bool(self.value(self.template["Conditions"][name]))
        return self.conditions[name]

    def active(self, resource):
        """Whether a resource (or output) is created under the conditions."""
        cond = resource.get("Condition")
        return cond is None or self.condition(cond)

    def ref(self, name):
        if name in self.parameters:
            return self.parameters[name]
        if name == "AWS::NoValue":
            return NO_VALUE
        if name.startswith("AWS::"):
            if name not in self.pseudo:
                raise Unresolved(name)
            return self.pseudo[name]
        if name in self.refs:
            return self.refs[name]
        if name in self.late:
            return LATE
        if name in self.template.get("Resources", {}):
            raise Unresolved(name)
        raise TemplateError(f"Ref to unknown name {name}")

    def getatt(self, name, attr):
        if (name, attr) in self.attrs:
            return self.attrs[(name, attr)]
        if name in self.late:
            return LATE
        if name in self.template.get("Resources", {}):
            raise Unresolved(f"{name}.{attr}")
        raise TemplateError(f"GetAtt on unknown resource {name}")

    def sub(self, text, variables):
        def one(match):
            key = match.group(1)
            if key in variables:
                return str(variables[key])
            if "." in key and not key.startswith("AWS::"):
                name, attr = key.split(".", 1)
                return str(self.getatt(name, attr))
            return str(self.ref(key))

        return SUB_VAR.sub(one, text).replace("${!", "${")

    def value(self, node):
        if isinstance(node, list):
            out = [self.value(v) for v in node]
            return [v for v in out if v is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (key, arg), = node.items()
            fn = FUNCTIONS.get(key)
            if fn is not None:
                return fn(self, arg)
            if key.startswith("Fn::"):
                raise TemplateError(f"intrinsic {key} is not known to the rehearsal")
        out = {}
        for k, v in node.items():
            v = self.value(v)
            if v is not NO_VALUE:
                out[k] = v
        return out


def _getatt(r, arg):
    if isinstance(arg, str):
        arg = arg.split(".", 1)
    return r.getatt(arg[0], r.value(arg[1]))


def _sub(r, arg):
    if isinstance(arg, str):
        return r.sub(arg, {})
    text, variables = arg
    return r.sub(text, {k: r.value(v) for k, v in variables.items()})


def _if(r, arg):
    name, yes, no = arg
    return r.value(yes if r.condition(name) else no)


def _join(r, arg):
    sep, items = arg
    return sep.join(str(v) for v in r.value(items))


def _select(r, arg):
    index, items = arg
    return r.value(items)[int(r.value(index))]


def _split(r, arg):
    sep, text = arg
    return r.value(text).split(sep)


def _equals(r, arg):
    a, b = (r.value(v) for v in arg)
    return str(a) == str(b)


FUNCTIONS = {
    "Ref": lambda r, arg: r.ref(arg),
    "Fn::GetAtt": _getatt,
    "Fn::Sub": _sub,
    "Fn::If": _if,
    "Fn::Join": _join,
    "Fn::Select": _select,
    "Fn::Split": _split,
    "Fn::Equals": _equals,
    "Fn::Not": lambda r, arg: not r.value(arg[0]),
    "Fn::And": lambda r, arg: all(r.value(v) for v in arg),
    "Fn::Or": lambda r, arg: any(r.value(v) for v in arg),
    "Condition": lambda r, arg: r.condition(arg),
}


def references(node):
    """The logical ids and pseudo parameters a node names (Ref, GetAtt, ${} in Sub)."""
    found = set()

    def walk(n, local=()):
        if isinstance(n, list):
            for v in n:
                walk(v, local)
        elif isinstance(n, dict):
            if len(n) == 1:
                (key, arg), = n.items()
                if key == "Ref":
                    found.add(arg)
                    return
                if key == "Fn::GetAtt":
                    found.add(arg.split(".", 1)[0] if isinstance(arg, str) else arg[0])
                    return
                if key == "Fn::Sub":
                    text, variables = (arg, {}) if isinstance(arg, str) else arg
                    walk(list(variables.values()), local)
                    for var in SUB_VAR.findall(text):
                        name = var if var.startswith("AWS::") else var.split(".", 1)[0]
                        if name not in variables:
                            found.add(name)
                    return
            for v in n.values():
                walk(v, local)

    walk(node)
    return found


def substitute(node, resolver, names):
    """`node` with every Ref, GetAtt and ${} of a resource in `names` replaced by
    its concrete value (what moto's CloudFormation could not answer itself)."""
    if isinstance(node, list):
        return [substitute(v, resolver, names) for v in node]
    if not isinstance(node, dict):
        return node
    if len(node) == 1:
        (key, arg), = node.items()
        if key == "Ref" and arg in names:
            return resolver.ref(arg)
        if key == "Fn::GetAtt":
            parts = arg.split(".", 1) if isinstance(arg, str) else arg
            if parts[0] in names:
                return resolver.getatt(parts[0], parts[1])
        if key == "Fn::Sub":
            text, variables = (arg, None) if isinstance(arg, str) else arg

            def one(match):
                var = match.group(1)
                if variables and var in variables:
                    return match.group(0)
                name, _, attr = var.partition(".")
                if name in names:
                    return str(resolver.getatt(name, attr) if attr else resolver.ref(name))
                return match.group(0)

            text = SUB_VAR.sub(one, text)
            if variables is None:
                return {"Fn::Sub": text}
            return {"Fn::Sub": [text, substitute(variables, resolver, names)]}
    return {k: substitute(v, resolver, names) for k, v in node.items()}
