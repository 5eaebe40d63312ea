"""The service definition as users write it (YAML or JSON), and the API's responses about it.

These models check shape, types and ranges; cross-field rules and references are checked by
`validation.validate_definition`, which can name every offending item at once.
"""

from __future__ import annotations

import shlex
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StrictBool,
    StringConstraints,
    TypeAdapter,
    WithJsonSchema,
    field_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from app.shared.schemas import INTEGRAL, Description, Name, StrictModel, SubsystemType
from spark_jobs.manager import policy as rules

MAX_PERIODS = 8
MAX_RULE_DEPTH = 15
DAY_MS = rules.DAY_MS

ResponseTimeMs = Annotated[int, Field(strict=True, gt=0, le=DAY_MS), INTEGRAL]


# Each goal and the server limits hand the manager's rules (spark_jobs/manager/) their plain twin: `rule()`.
class AverageGoal(StrictModel):
    type: Literal["average"]
    response_time_ms: ResponseTimeMs

    def rule(self) -> rules.AverageGoal:
        return rules.AverageGoal(self.response_time_ms)


class PercentileGoal(StrictModel):
    type: Literal["percentile"]
    percentile: Annotated[int, Field(strict=True, ge=1, le=99), INTEGRAL]
    response_time_ms: ResponseTimeMs

    def rule(self) -> rules.PercentileGoal:
        return rules.PercentileGoal(self.percentile, self.response_time_ms)


class VelocityGoal(StrictModel):
    type: Literal["velocity"]
    velocity: Annotated[int, Field(strict=True, ge=1, le=99), INTEGRAL]

    def rule(self) -> rules.VelocityGoal:
        return rules.VelocityGoal(self.velocity)


class DiscretionaryGoal(StrictModel):
    type: Literal["discretionary"]

    def rule(self) -> rules.DiscretionaryGoal:
        return rules.DiscretionaryGoal()


Goal = Annotated[AverageGoal | PercentileGoal | VelocityGoal | DiscretionaryGoal, Field(discriminator="type")]
Importance = Annotated[int, Field(strict=True, ge=1, le=5), INTEGRAL]


class Period(StrictModel):
    duration_ms: Annotated[int, Field(strict=True, gt=0), INTEGRAL] | None = None
    importance: Importance | None = None
    goal: Goal


def _given(field: str) -> dict[str, Any]:
    """JSON Schema for "the field is there and not null"."""
    return {"required": [field], "properties": {field: {"not": {"type": "null"}}}}


class ServiceClass(StrictModel):
    """Either one period given directly (`importance`, `goal`) or a list of `periods`."""

    # Declared for clients and form builders; app.policy.validation checks it, with a message for each case.
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                _given("periods") | {"not": {"anyOf": [_given("goal"), _given("importance")]}},
                _given("goal") | {"not": _given("periods")},
            ]
        }
    )

    name: Name
    description: Description = ""
    importance: Importance | None = None
    goal: Goal | None = None
    # Its length is declared rather than enforced, for the same reason.
    periods: Annotated[list[Period] | None, Field(json_schema_extra={"minItems": 1, "maxItems": MAX_PERIODS})] = None
    # The resource group whose caps its work counts against (with every other class of the group, everywhere).
    resource_group: Name | None = None


InFlight = Annotated[int, Field(strict=True, ge=0, le=1_000_000), INTEGRAL]


class ResourceGroup(StrictModel):
    """Caps on the requests its service classes have selected or begun at once, across every environment, node and
    replica (z/OS WLM's resource groups, counted in requests rather than service units)."""

    name: Name
    description: Description = ""
    max_in_flight: Annotated[int, Field(strict=True, ge=1, le=1_000_000), INTEGRAL] | None = Field(
        default=None, description="never more of its requests selected or begun at once"
    )
    min_in_flight: InFlight | None = Field(
        default=None, description="while fewer are, its work is selected before other work of equal or lower importance"
    )


class ReportClass(StrictModel):
    name: Name
    description: Description = ""


def _report_class_from_name(value: Any) -> Any:
    return {"name": value} if isinstance(value, str) else value


class _OrItsName:
    """Declares a model that may be given as its bare name (`report_classes: [ATMA]`) in the JSON schema too, so
    that a client generated from the OpenAPI document can send, and load, what the service accepts."""

    def __get_pydantic_json_schema__(self, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {"anyOf": [handler(core_schema), handler(TypeAdapter(Name).core_schema)]}


class Qualifier(StrEnum):
    """Work qualifiers of WLM classification rules, by their WLM abbreviation."""

    TN = "TN"  # transaction name
    UI = "UI"  # userid
    TC = "TC"  # transaction class
    SI = "SI"  # subsystem instance
    SPM = "SPM"  # subsystem parameter
    PF = "PF"  # perform
    PR = "PR"  # procedure name
    PC = "PC"  # process name
    CN = "CN"  # collection name
    AI = "AI"  # accounting information
    LU = "LU"  # LU name
    NET = "NET"  # network id
    SY = "SY"  # system (node) name
    PK = "PK"  # package name
    PN = "PN"  # plan name
    CT = "CT"  # connection type
    SE = "SE"  # scheduling environment


# Classification attributes as the API spells them (enclave requests), by qualifier.
QUALIFIER_ATTRIBUTES: dict[Qualifier, str] = {
    Qualifier.TN: "transaction_name",
    Qualifier.UI: "userid",
    Qualifier.TC: "transaction_class",
    Qualifier.SI: "subsystem_instance",
    Qualifier.SPM: "subsystem_parameter",
    Qualifier.PF: "perform",
    Qualifier.PR: "procedure_name",
    Qualifier.PC: "process_name",
    Qualifier.CN: "collection_name",
    Qualifier.AI: "accounting_information",
    Qualifier.LU: "lu_name",
    Qualifier.NET: "net_id",
    Qualifier.SY: "system_name",
    Qualifier.PK: "package_name",
    Qualifier.PN: "plan_name",
    Qualifier.CT: "connection_type",
    Qualifier.SE: "scheduling_environment",
}


def _upper_if_str(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


class Rule(StrictModel):
    """Matches when the work's `qualifier` attribute matches `value` (`*` any run of characters, `?` one).
    A nested rule refines its parent's match and inherits whatever it leaves blank."""

    qualifier: Annotated[Qualifier, BeforeValidator(_upper_if_str)]
    value: Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00]*$")]
    service_class: Name | None = None
    report_class: Name | None = None
    description: Description = ""
    rules: list[Rule] = Field(default_factory=list)


class ClassificationGroup(StrictModel):
    subsystem_type: SubsystemType
    description: Description = ""
    default_service_class: Name
    default_report_class: Name | None = None
    rules: list[Rule] = Field(default_factory=list)


class ServerLimits(StrictModel):
    min: Annotated[int, Field(strict=True, ge=0, le=rules.MAX_SERVERS), INTEGRAL] = 0
    max: Annotated[int, Field(strict=True, ge=1, le=rules.MAX_SERVERS), INTEGRAL] | None = None
    spread_min: StrictBool = False

    def rule(self) -> rules.ServerLimits:
        return rules.ServerLimits(self.min, self.max, self.spread_min)


# MQ's cluster workload attributes (IBM MQ's: docs/sources.md) with their ranges and defaults; app.routing.algorithm reads them.
DEFAULT_WEIGHT = 50  # CLWLWGHT
MRU_CAP_MAX = 999_999_999  # CLWLMRUC's largest value and its default: every channel may be used
Rank = Annotated[int, Field(strict=True, ge=0, le=9, description="CLWLRANK: the highest rank is used"), INTEGRAL]
RoutingPriority = Annotated[
    int, Field(strict=True, ge=0, le=9, description="CLWLPRTY: among equal ranks, the highest priority is used"), INTEGRAL
]
Weight = Annotated[
    int, Field(strict=True, ge=1, le=99, description="CLWLWGHT: the share of requests, against the other nodes' weights"), INTEGRAL
]
NetworkPriority = Annotated[int, Field(strict=True, ge=0, le=9, description="NETPRTY: links with the highest are used"), INTEGRAL]
MostRecentlyUsedCap = Annotated[
    int,
    Field(strict=True, ge=1, le=MRU_CAP_MAX, description="CLWLMRUC: queue managers on this node send to at most this many nodes"),
    INTEGRAL,
]
InstanceUseQueue = Literal["LOCAL", "ANY", "QMGR"]
NodeUseQueue = Literal["LOCAL", "ANY"]


class InstanceRouting(StrictModel):
    """The environment's instance on one node, as a cluster queue."""

    put_enabled: StrictBool = True
    rank: Rank = 0
    priority: RoutingPriority = 0
    # CLWLUSEQ: LOCAL keeps a queue manager's requests on its own node, ANY lets them go anywhere, QMGR follows the node.
    use_queue: InstanceUseQueue = "QMGR"


class EnvironmentSettings(StrictModel):
    """What a queue manager may say of a dynamic application environment; the service definition's ones say more."""

    name: Name
    description: Description = ""
    server_limits: ServerLimits = Field(default_factory=ServerLimits)
    completion_time_ms: Annotated[int, Field(strict=True, gt=0, le=DAY_MS), INTEGRAL] = 60_000
    backlog_limit: Annotated[int, Field(strict=True, gt=0, le=100_000_000), INTEGRAL] = 100_000
    # Deliveries of one request before it is abandoned (select, then completion time passes without an end).
    max_deliveries: Annotated[int, Field(strict=True, ge=1, le=100), INTEGRAL] = 5
    # Nodes that host this environment; none named: every node.
    nodes: list[Name] | None = None
    # Routing attributes of the instance on a node (keyed by node); a node not named has the defaults.
    instances: dict[Name, InstanceRouting] = Field(default_factory=dict)


class ApplicationEnvironment(EnvironmentSettings):
    subsystem_type: SubsystemType
    # The server "procedure": argv of the process the launcher starts; a string is split like a shell would.
    start_command: list[Annotated[str, StringConstraints(min_length=1, pattern=r"^[^\x00]*$")]] | None = None

    @field_validator("start_command", mode="before")
    @classmethod
    def _split_command(cls, value: Any) -> Any:
        return shlex.split(value) if isinstance(value, str) else value


class NodeRouting(StrictModel):
    """A node as the queue manager at the end of a cluster channel: the routing attributes an operator can also
    change at run time (PATCH /v1/routing/nodes/{node})."""

    # CLWLUSEQ of the queue manager: what an instance's QMGR means on this node.
    use_queue: NodeUseQueue = "LOCAL"
    weight: Weight = DEFAULT_WEIGHT
    network_priority: NetworkPriority = 0
    rank: Rank = 0
    most_recently_used: MostRecentlyUsedCap = MRU_CAP_MAX
    suspended: StrictBool = False


class NodeLink(StrictModel):
    """A link to a node (a cluster channel to its queue manager): routing uses, of each node's links, those with the
    highest NETPRTY (MQ's step 13: docs/routing.md)."""

    name: Name
    # None: the node's network_priority.
    network_priority: NetworkPriority | None = None


class Node(NodeRouting):
    name: Name
    description: Description = ""
    # None: one link, named as the node, with the node's network_priority (a node's single link).
    links: list[NodeLink] | None = Field(default=None, min_length=1)


class ServiceDefinition(StrictModel):
    name: Name
    description: Description = ""
    service_classes: list[ServiceClass] = Field(min_length=1)
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    report_classes: list[Annotated[ReportClass, BeforeValidator(_report_class_from_name), _OrItsName()]] = Field(default_factory=list)
    classification: list[ClassificationGroup] = Field(default_factory=list)
    application_environments: list[ApplicationEnvironment] = Field(default_factory=list)
    nodes: list[Node] = Field(default_factory=list)


class DynamicApplicationEnvironmentIn(EnvironmentSettings):
    """IWM4AEDF: a queue manager defines an environment for itself. Its servers are started by the queue manager
    or an external autoscaler (the service runs only the commands of the admin's service definition)."""

    connect_token: Annotated[str, StringConstraints(min_length=1, max_length=128)]


class PolicyVersionOut(BaseModel):
    version: int
    name: str
    digest: str
    installed_by: str
    installed_at: datetime


class PolicyOut(PolicyVersionOut):
    definition: dict[str, Any]


class PolicyInstallOut(PolicyVersionOut):
    # False when the document equals the active one: nothing was installed, the active version is returned.
    changed: bool
    dry_run: bool = False


class PolicyVersionList(BaseModel):
    items: list[PolicyVersionOut]
    total: int
    limit: int
    offset: int


def _any_case(code: str) -> str:
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in code)


# Work attributes by API name (transaction_name, userid, transaction_class, ...) or by qualifier (TN, UI, TC, ...).
# The names app.policy.service.qualifier_attributes takes are declared, so that a generated client knows them (an API
# name as spelt, or a qualifier in any case), not checked here: the service names the known ones when refusing.
ATTRIBUTE_NAME_PATTERN = "^(" + "|".join([*QUALIFIER_ATTRIBUTES.values(), *(_any_case(q.value) for q in Qualifier)]) + ")$"
ATTRIBUTE_VALUE = {"type": "string", "maxLength": 256, "pattern": r"^[^\x00]*$"}
Attributes = Annotated[
    dict[
        Annotated[str, StringConstraints(max_length=64)],
        Annotated[str, StringConstraints(max_length=256, pattern=ATTRIBUTE_VALUE["pattern"])],
    ],
    WithJsonSchema(
        {"type": "object", "propertyNames": {"maxLength": 64, "pattern": ATTRIBUTE_NAME_PATTERN}, "additionalProperties": ATTRIBUTE_VALUE}
    ),
]


class ClassifyIn(StrictModel):
    subsystem_type: SubsystemType
    attributes: Attributes = Field(default_factory=dict)


class ClassifyOut(BaseModel):
    policy_version: int
    service_class: str
    report_class: str | None
    # The nesting path of rules that matched, outermost first, e.g. ["UI=ATM*", "TN=CASH"]; empty for the default.
    matched_rules: list[str]
