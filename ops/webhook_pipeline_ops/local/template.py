"""A SAM/CloudFormation template read and resolved for the local stack (:class:`Resolver`):
``!Ref`` parameters (their ``Default`` unless overridden), pseudo parameters, conditions,
``!GetAtt``, ``!Sub``, ``!Join``, ``!If``, ``!FindInMap`` and friends, against the local names of
what :mod:`.provision` created (:class:`Resolved`). What refers to something the local stack does
not have raises :class:`UnresolvableError`."""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The logger of :mod:`.provision`, whose part this was.
log = logging.getLogger("webhook_pipeline_ops.local.provision")

ACCOUNT_ID = "123456789012"  # moto's default account
DEFAULT_STACK_NAME = "webhook-pipeline-local"

NO_VALUE = object()


class UnresolvableError(Exception):
    """A template value refers to something the local stack does not have."""


def load_template(path: str | Path) -> dict[str, Any]:
    """Parse a CloudFormation/SAM template (YAML short tags become their ``Fn::`` long form).

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    """
    from cfn_tools import load_yaml

    text = Path(path).read_text()
    data: dict[str, Any] = _plain(load_yaml(text))
    return data


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@dataclass
class Resolved:
    """What ``!Ref`` and ``!GetAtt`` give for one created (or named) resource."""

    ref: str
    attrs: dict[str, Any] = field(default_factory=dict)


class Resolver:
    """Evaluate intrinsic functions against parameters, conditions and created resources."""

    def __init__(
        self,
        template: Mapping[str, Any],
        *,
        region: str,
        stack_name: str,
        parameter_overrides: Mapping[str, str] | None = None,
    ) -> None:
        self.template = template
        self.region = region
        self.stack_name = stack_name
        self.resources: dict[str, Resolved] = {}
        self.parameters: dict[str, Any] = {}
        overrides = dict(parameter_overrides or {})
        for name, spec in (template.get("Parameters") or {}).items():
            if name in overrides:
                value: Any = overrides.pop(name)
            elif "Default" in spec:
                value = spec["Default"]
            else:
                continue  # unresolvable when referenced
            if str(spec.get("Type", "")).startswith(("CommaDelimitedList", "List<")):
                value = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
            elif not isinstance(value, list):
                value = str(value)
            self.parameters[name] = value
        for name in overrides:
            log.warning("parameter override %s is not a template parameter; ignored", name)
        self._conditions: dict[str, bool] = {}

    # pseudo parameters ---------------------------------------------------------------------
    def pseudo(self, name: str) -> Any:
        table = {
            "AWS::Region": self.region,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::StackName": self.stack_name,
            "AWS::StackId": f"arn:aws:cloudformation:{self.region}:{ACCOUNT_ID}:stack/"
            f"{self.stack_name}/00000000-0000-0000-0000-000000000000",
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NotificationARNs": [],
        }
        if name == "AWS::NoValue":
            return NO_VALUE
        if name not in table:
            raise UnresolvableError(f"pseudo parameter {name}")
        return table[name]

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            spec = (self.template.get("Conditions") or {}).get(name)
            if spec is None:
                raise UnresolvableError(f"condition {name}")
            self._conditions[name] = bool(self.resolve(spec))
        return self._conditions[name]

    def ref(self, name: str) -> Any:
        if name.startswith("AWS::"):
            return self.pseudo(name)
        if name in self.parameters:
            return self.parameters[name]
        if name in self.resources:
            return self.resources[name].ref
        raise UnresolvableError(f"Ref {name}")

    def get_att(self, name: str, attr: str) -> Any:
        res = self.resources.get(name)
        if res is None or attr not in res.attrs:
            raise UnresolvableError(f"GetAtt {name}.{attr}")
        return res.attrs[attr]

    # evaluation ----------------------------------------------------------------------------
    def resolve(self, value: Any) -> Any:
        """Return ``value`` with every intrinsic function evaluated.

        Raises
        ------
        UnresolvableError
            A reference to a resource, parameter or function the local stack cannot resolve.
        """
        if isinstance(value, list):
            items = [self.resolve(v) for v in value]
            return [v for v in items if v is not NO_VALUE]
        if not isinstance(value, Mapping):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            fn = self._functions().get(key)
            if fn is not None:
                return fn(arg)
        out = {}
        for k, v in value.items():
            r = self.resolve(v)
            if r is not NO_VALUE:
                out[k] = r
        return out

    def _functions(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "Ref": lambda a: self.ref(str(a)),
            "Fn::GetAtt": self._fn_get_att,
            "Fn::Sub": self._fn_sub,
            "Fn::Join": lambda a: str(self.resolve(a[0])).join(
                str(x) for x in self._as_list(self.resolve(a[1]))
            ),
            "Fn::Select": lambda a: self._as_list(self.resolve(a[1]))[int(self.resolve(a[0]))],
            "Fn::Split": lambda a: str(self.resolve(a[1])).split(str(self.resolve(a[0]))),
            "Fn::If": lambda a: self.resolve(a[1] if self.condition(a[0]) else a[2]),
            "Fn::Equals": lambda a: str(self.resolve(a[0])) == str(self.resolve(a[1])),
            "Fn::Not": lambda a: not self.resolve(a[0]),
            "Fn::And": lambda a: all(self.resolve(x) for x in a),
            "Fn::Or": lambda a: any(self.resolve(x) for x in a),
            "Condition": lambda a: self.condition(str(a)),
            "Fn::FindInMap": self._fn_find_in_map,
            "Fn::GetAZs": lambda a: [f"{self.region}{z}" for z in "abc"],
            "Fn::Base64": lambda a: base64.b64encode(str(self.resolve(a)).encode()).decode(),
            "Fn::ToJsonString": lambda a: json.dumps(self.resolve(a), separators=(",", ":")),
            "Fn::ImportValue": self._unresolvable("Fn::ImportValue"),
            "Fn::Cidr": self._unresolvable("Fn::Cidr"),
            "Fn::Transform": self._unresolvable("Fn::Transform"),
        }

    @staticmethod
    def _unresolvable(name: str) -> Callable[[Any], Any]:
        def fail(arg: Any) -> Any:
            raise UnresolvableError(f"{name} {arg!r}")

        return fail

    @staticmethod
    def _as_list(value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise UnresolvableError(f"expected a list, got {value!r}")
        return value

    def _fn_get_att(self, arg: Any) -> Any:
        if isinstance(arg, str):
            name, _, attr = arg.partition(".")
        else:
            name, attr = str(arg[0]), str(self.resolve(arg[1]))
        return self.get_att(name, attr)

    def _fn_find_in_map(self, arg: Any) -> Any:
        mapping, top, second = (self.resolve(x) for x in arg)
        try:
            return self.template["Mappings"][mapping][top][second]
        except KeyError as exc:
            raise UnresolvableError(f"FindInMap {mapping}/{top}/{second}") from exc

    def _fn_sub(self, arg: Any) -> str:
        if isinstance(arg, list):
            text, variables = str(arg[0]), {k: self.resolve(v) for k, v in arg[1].items()}
        else:
            text, variables = str(arg), {}

        def repl(match: re.Match[str]) -> str:
            expr = match.group(1)
            if expr.startswith("!"):
                return "${" + expr[1:] + "}"
            if expr in variables:
                return str(variables[expr])
            if "." in expr and not expr.startswith("AWS::"):
                name, _, attr = expr.partition(".")
                return str(self.get_att(name, attr))
            return str(self.ref(expr))

        return re.sub(r"\$\{([^}]+)\}", repl, text)


def attr_str(value: Any) -> str:
    """A resolved value as an attribute or environment string (booleans lower case, lists and
    objects as JSON)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)
