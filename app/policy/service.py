"""Installing, reading and caching the service definition."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.service import record
from app.auth.roles import PrincipalInfo
from app.db import utcnow
from app.errors import Conflict, NotFound, PayloadTooLarge, ValidationFailed, pydantic_errors
from app.policy.active import ActivePolicy, DynamicOwner, compile_policy, with_dynamic
from app.policy.documents import parse_document
from app.policy.models import DynamicApplicationEnvironment, PolicyVersion
from app.policy.schemas import (
    QUALIFIER_ATTRIBUTES,
    ApplicationEnvironment,
    DynamicApplicationEnvironmentIn,
    Qualifier,
    ServiceDefinition,
)
from app.policy.validation import completion_time_refusal, environment_problems, validate_definition
from app.queues.store import QueueStore
from app.shared.generation import GatedValue, Generations, count_change
from spark_jobs.contract.goals import SYSOTHER

INSTALL_ATTEMPTS = 3
NO_POLICY_MESSAGE = "no service definition is installed yet: PUT /v1/policy"


def parse_definition(data: dict[str, Any], longest_completion_ms: int | None = None) -> ServiceDefinition:
    """Plain data to a checked definition, or ValidationFailed naming every offending field. `longest_completion_ms`:
    the longest completion time the service's tombstones cover (Settings.longest_completion_ms; None: any)."""
    try:
        definition = ServiceDefinition.model_validate(data)
    except ValidationError as exc:
        raise ValidationFailed(pydantic_errors(exc.errors(), data)) from exc
    problems = validate_definition(definition, longest_completion_ms)
    if problems:
        raise ValidationFailed(problems)
    return definition


def checked_candidate(body: bytes, content_type: str | None, max_bytes: int, longest_completion_ms: int) -> dict[str, Any]:
    """A candidate definition (a what-if's) checked as an install checks it, within the install's size limit and the
    tombstones' bound (a candidate this service would refuse to install is not one to plan with): its plain data as
    an install stores it, or the install's errors."""
    if len(body) > max_bytes:
        raise PayloadTooLarge(f"the service definition has {len(body)} bytes; at most {max_bytes}", limit=max_bytes)
    definition = parse_definition(parse_document(body, content_type), longest_completion_ms)
    return definition.model_dump(mode="json", exclude_none=True)


def digest_of(definition: ServiceDefinition) -> str:
    canonical = json.dumps(definition.model_dump(mode="json", exclude_none=True), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class QueueManagerRef:
    """A connected queue manager as the policy knows it: the owner of the dynamic environments it defines."""

    id: int
    subsystem_type: str
    subsystem_name: str


class QueueManagers(Protocol):
    """The connections the policy needs to know of. Connections are a layer above the policy, so the app hands their
    domain in (app.connections.queue_managers) rather than the policy importing it."""

    async def connected(self, session: AsyncSession, principal: PrincipalInfo, token: str) -> QueueManagerRef:
        """The caller's active queue manager connection by its connect token."""
        ...

    async def dynamic_environments(self, session: AsyncSession) -> list[tuple[DynamicApplicationEnvironment, QueueManagerRef]]:
        """Every dynamic application environment with the queue manager that defined it."""
        ...


class PolicyStore:
    """The active policy, compiled, cached per process until the settings' counter moves (Generations): another
    replica's install is seen within the counter's time; an install on this process is seen at once. It reads the
    database with short sessions of its own, so a request (a long-polling select above all) never holds a database
    connection for it, and in steady state no request waits for a read (after a change, callers wait for one read
    shared by them all)."""

    def __init__(self, generations: Generations, queue_managers: QueueManagers) -> None:
        self.sessions = generations.sessions
        self.queue_managers = queue_managers
        self._active: GatedValue[ActivePolicy] = GatedValue(generations, self._load_latest)
        self._latest: ActivePolicy | None = None
        self._versions: dict[int, ActivePolicy] = {}

    async def active(self) -> ActivePolicy:
        return await self._active.get()

    async def current(self) -> ActivePolicy | None:
        """The active policy, or None before the first install."""
        try:
            return await self.active()
        except NotFound:
            return None

    async def knowing(self, application_environment: str) -> ActivePolicy:
        """The active policy, read again if it does not know `application_environment`: a dynamic environment
        defined on another replica a moment ago is found at once, not after the cache's time."""
        policy = await self.active()
        if application_environment not in policy.application_environments:
            self.invalidate()
            policy = await self.active()
        return policy

    async def _load_latest(self, session: AsyncSession) -> ActivePolicy:
        latest = await session.scalar(select(func.max(PolicyVersion.version)))
        if latest is None:
            raise NotFound(NO_POLICY_MESSAGE, code="no_policy")
        if self._latest is None or self._latest.version != latest:
            row = await session.get(PolicyVersion, latest)
            assert row is not None
            self._latest = compile_policy(row.version, ServiceDefinition.model_validate(row.definition))
        environments = [
            (
                ApplicationEnvironment.model_validate(row.definition | {"subsystem_type": owner.subsystem_type}),
                DynamicOwner(owner.id, owner.subsystem_name),
            )
            for row, owner in await self.queue_managers.dynamic_environments(session)
        ]
        return with_dynamic(self._latest, environments)

    async def version(self, version: int) -> ActivePolicy | None:
        """Any installed version, compiled (cached; versions never change)."""
        if self._latest is not None and self._latest.version == version:
            return self._latest
        if version not in self._versions:
            async with self.sessions() as session:
                row = await session.get(PolicyVersion, version)
            if row is None:
                return None
            self._versions[version] = compile_policy(row.version, ServiceDefinition.model_validate(row.definition))
        return self._versions[version]

    def invalidate(self) -> None:
        self._active.clear()


_QUALIFIERS_BY_NAME: dict[str, Qualifier] = {name: q for q, name in QUALIFIER_ATTRIBUTES.items()} | {q.value: q for q in Qualifier}


def qualifier_attributes(attributes: dict[str, str], *, path: str) -> dict[Qualifier, str]:
    """Work attributes by API name (`transaction_name`) or qualifier (`TN`) to a mapping by qualifier."""
    result: dict[Qualifier, str] = {}
    problems = []
    for name, value in attributes.items():
        qualifier = _QUALIFIERS_BY_NAME.get(name) or _QUALIFIERS_BY_NAME.get(name.upper())
        if qualifier is None:
            problems.append({"path": f"{path}.{name}", "message": f"unknown attribute; known: {', '.join(QUALIFIER_ATTRIBUTES.values())}"})
        else:
            result[qualifier] = value
    if problems:
        raise ValidationFailed(problems)
    return result


async def latest_version(session: AsyncSession) -> PolicyVersion | None:
    return await session.scalar(select(PolicyVersion).order_by(PolicyVersion.version.desc()).limit(1))


async def active_version(session: AsyncSession) -> PolicyVersion:
    row = await latest_version(session)
    if row is None:
        raise NotFound(NO_POLICY_MESSAGE, code="no_policy")
    return row


async def install(
    session: AsyncSession,
    store: PolicyStore,
    queues: QueueStore,
    actor: str,
    body: bytes,
    content_type: str | None,
    *,
    dry_run: bool,
    longest_completion_ms: int | None = None,
) -> tuple[PolicyVersion, bool]:
    """Validate and activate a definition. Returns the version and whether anything changed."""
    definition = parse_definition(parse_document(body, content_type), longest_completion_ms)
    digest = digest_of(definition)
    await _refuse_stranding_work(store, queues, definition)
    for _ in range(INSTALL_ATTEMPTS):
        current = await latest_version(session)
        if current is not None and current.digest == digest:
            return current, False
        candidate = PolicyVersion(
            version=(current.version if current else 0) + 1,
            name=definition.name,
            digest=digest,
            definition=definition.model_dump(mode="json", exclude_none=True),
            source=body.decode("utf-8"),
            installed_by=actor,
            installed_at=utcnow(),
        )
        if dry_run:
            return candidate, True
        session.add(candidate)
        record(session, actor, "policy.install", definition.name, version=candidate.version, digest=digest)
        try:
            await count_change(session)
            await session.commit()
        except IntegrityError:
            # Another replica installed the same version number first; read the new latest and try again.
            await session.rollback()
            continue
        store.invalidate()
        return candidate, True
    raise Conflict("concurrent installs kept colliding; try again", code="install_conflict")


async def _refuse_stranding_work(store: PolicyStore, queues: QueueStore, definition: ServiceDefinition) -> None:
    """A service class that still has queued or held work must stay until that work is done: select would no
    longer see its queue. (Removing an application environment is the operator's DELETING state, not this.)"""
    current = await store.current()
    if current is None:
        return
    keep = {sc.name for sc in definition.service_classes} | {SYSOTHER}
    kept_aes = {ae.name for ae in definition.application_environments}
    if clashes := sorted(kept_aes & set(current.dynamic)):
        raise Conflict(
            f"queue managers have defined dynamic application environments named {', '.join(clashes)}; a static one "
            "may take such a name once they have disconnected",
            code="dynamic_name_in_use",
            application_environments=clashes,
        )
    kept_aes |= set(current.dynamic)
    stranded = []
    for ae in current.application_environments:
        if ae not in kept_aes:
            continue
        for node in current.nodes:
            if current.hosts(ae, node):
                for service_class in sorted(await queues.environments.classes_in_use(queues.keys(node, ae)) - keep):
                    stranded.append({"application_environment": ae, "node": node, "service_class": service_class})
    if stranded:
        raise Conflict(
            "the new policy removes service classes that still have queued or selected work; let it finish (or delete it) first",
            code="classes_in_use",
            in_use=stranded,
        )


async def refuse_short_tombstones(store: PolicyStore, longest_completion_ms: int) -> None:
    """At start: the active policy's environments (dynamic ones too) whose completion time the tombstones' bound
    does not cover refuse the start, as an install of that policy would be refused."""
    policy = await store.current()
    if policy is None:
        return
    name, ae = max(policy.application_environments.items(), key=lambda item: item[1].completion_time_ms, default=(None, None))
    if name is not None and ae is not None and ae.completion_time_ms > longest_completion_ms:
        refusal = completion_time_refusal(ae.completion_time_ms, longest_completion_ms)
        raise RuntimeError(f"the active policy's application environment {name}: completion_time_ms {refusal}")


async def define_dynamic(
    session: AsyncSession,
    store: PolicyStore,
    principal: PrincipalInfo,
    body: DynamicApplicationEnvironmentIn,
    *,
    most_per_queue_manager: int,
    longest_completion_ms: int | None = None,
) -> tuple[DynamicApplicationEnvironment, QueueManagerRef, bool]:
    """IWM4AEDF. Returns the environment, its queue manager's connection and whether it is new: defining the
    same environment again is answered with the first definition; a different one under the name is refused."""
    qm = await store.queue_managers.connected(session, principal, body.connect_token)
    policy = await store.knowing(body.name)
    if body.name in policy.application_environments and body.name not in policy.dynamic:
        raise Conflict(f"{body.name} is an application environment of the service definition", code="static_application_environment")
    if problems := environment_problems("", body, set(policy.nodes), longest_completion_ms):
        raise ValidationFailed(problems)
    definition = body.model_dump(mode="json", exclude={"connect_token"}, exclude_none=True)
    existing = await session.get(DynamicApplicationEnvironment, body.name)
    if existing is not None:
        if existing.queue_manager_id != qm.id:
            raise Conflict(f"another queue manager has defined {body.name}", code="application_environment_in_use")
        if existing.definition != definition:
            raise Conflict(
                f"{body.name} is defined already, differently; it is removed when this queue manager disconnects",
                code="defined_differently",
            )
        return existing, qm, False
    defined = await session.scalar(select(func.count()).where(DynamicApplicationEnvironment.queue_manager_id == qm.id))
    if (defined or 0) >= most_per_queue_manager:
        raise Conflict(
            f"this queue manager has defined {defined} dynamic application environments, the most allowed", code="too_many_dynamic"
        )
    row = DynamicApplicationEnvironment(name=body.name, queue_manager_id=qm.id, definition=definition, defined_at=utcnow())
    session.add(row)
    record(session, principal.name, "application_environment.define", body.name, queue_manager=qm.id)
    try:
        await count_change(session)
        await session.commit()
    except IntegrityError:  # another queue manager took the name at the same moment
        await session.rollback()
        raise Conflict(f"another queue manager has defined {body.name}", code="application_environment_in_use") from None
    store.invalidate()
    return row, qm, True


async def get_version(session: AsyncSession, version: int) -> PolicyVersion:
    row = await session.get(PolicyVersion, version)
    if row is None:
        raise NotFound(f"no policy version {version}", code="unknown_policy_version")
    return row


async def list_versions(session: AsyncSession, limit: int, offset: int) -> tuple[list[PolicyVersion], int]:
    total = await session.scalar(select(func.count()).select_from(PolicyVersion))
    rows = await session.scalars(select(PolicyVersion).order_by(PolicyVersion.version.desc()).limit(limit).offset(offset))
    return list(rows), total or 0
