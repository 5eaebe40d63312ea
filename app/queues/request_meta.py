"""A request's metadata, defined once: the JSON object per request in its environment's hash `req`, which the Lua
scripts read and stamp by short keys (`sc`, `qm`, states `q`/`s`/`b` ...: lua/includes/base.lua), and which every
Python reader and writer goes through here by name. The records that carry a request's keys are defined beside it:
an enclave's classes (given to each of its requests), an exit call's entry, a retired environment's place.

The JSON stays as the scripts and the requests already queued have it. A record is the parsed object itself, each
field a typed property of its key: a select reads every request it hands out, and (by timeit) a frozen dataclass of
two dozen fields cost eight times the parse to build, and Python descriptors made a select's reads three times a
dict's, where a property of C getters costs about what a subscript does. Keys this definition does not know stay as
they are.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from operator import itemgetter
from typing import Any, ClassVar, Generic, Self, TypeVar, overload

import orjson

T = TypeVar("T")
_REQUIRED: Any = object()


class RequestState(StrEnum):
    QUEUED = "q"
    SELECTED = "s"
    BEGUN = "b"

    @property
    def word(self) -> str:
        return self.name.lower()


# The states by their JSON value: a lookup, where RequestState(value) costs a select's read of a request twice over.
STATE_OF = {state.value: state for state in RequestState}
_QUEUED = RequestState.QUEUED.value  # (an enum's `value` is a property, slow on an insert's path)


class Key(Generic[T]):
    """A field stored under the JSON key `key`: its value, else `default` (a required key has none), read through
    `parse` if given. What mypy reads; at run time the record's class holds a property of a C getter in its place
    (JsonRecord.__init_subclass__)."""

    __slots__ = ("default", "key", "parse")

    def __init__(self, key: str, default: T = _REQUIRED, parse: Callable[[Any], T] | None = None) -> None:
        self.key, self.default, self.parse = key, default, parse

    @overload
    def __get__(self, record: None, owner: type) -> Key[T]: ...
    @overload
    def __get__(self, record: JsonRecord, owner: type) -> T: ...
    def __get__(self, record: JsonRecord | None, owner: type) -> Key[T] | T:
        raise NotImplementedError  # replaced by a property in each record class

    def getter(self) -> property:
        # A subscript, in C; a key absent from the record is its default (JsonRecord.__missing__).
        get = itemgetter(self.key)
        if self.parse is None:
            return property(get)
        parse = self.parse
        return property(lambda record: parse(get(record)))


class JsonRecord(dict[str, Any]):
    """One JSON object as parsed, its fields the class's `Key`s (read-only by convention: Python writes a record
    only as `of` or `replace` build it)."""

    __slots__ = ()
    _keys: ClassVar[dict[str, str]] = {}  # per class: field -> JSON key
    _defaults: ClassVar[dict[str, Any]] = {}  # per class: JSON key -> its field's default, where it has one

    def __init_subclass__(cls) -> None:
        keys = {name: value for name, value in vars(cls).items() if isinstance(value, Key)}
        cls._keys = {name: value.key for name, value in keys.items()}
        cls._defaults = {value.key: value.default for value in keys.values() if value.default is not _REQUIRED}
        for name, value in keys.items():
            setattr(cls, name, value.getter())

    def __missing__(self, key: str) -> Any:
        """An absent key's field default (a required key has none): the scripts write a field only once it is set."""
        try:
            return self._defaults[key]
        except KeyError:
            raise KeyError(key) from None

    @classmethod
    def reader(cls, *fields: str) -> Callable[[JsonRecord], tuple[Any, ...]]:
        """The values of `fields` (unparsed) in one C call: for a loop over every record, where a property per field
        cost the records' writer half as much again per record."""
        return itemgetter(*(cls._keys[name] for name in fields))

    @classmethod
    def json_key(cls, field: str) -> str:
        """The JSON key of `field`, for a reader that parses the JSON itself (the records writer's Arrow reader)."""
        return cls._keys[field]

    @classmethod
    def default_of(cls, field: str) -> Any:
        """The default of `field` where its key is absent (KeyError for a required one)."""
        return cls._defaults[cls._keys[field]]

    @classmethod
    def of(cls, **fields: Any) -> Self:
        """A new record of these fields (their JSON keys in this order)."""
        return cls({cls._keys[name]: value for name, value in fields.items()})

    @classmethod
    def from_json(cls, raw: str | bytes) -> Self:
        return cls(orjson.loads(raw))

    def replace(self, **fields: Any) -> Self:
        return type(self)({**self, **{self._keys[name]: value for name, value in fields.items()}})

    def to_json(self) -> bytes:
        return orjson.dumps(self)


class RequestMeta(JsonRecord):
    """What the insert writes (`queued`), then what the scripts stamp on the way: `place` and `inserted` (insert), a
    delivery's server and times (select, begin), a dead letter's `life` (retried), and the end's (finish). Instants
    are ms by Redis's clock."""

    __slots__ = ()

    service_class = Key[str]("sc")
    report_class = Key[str | None]("rc", None)
    dependent = Key[bool]("dep", False)
    queue_manager = Key[int]("qm")
    subsystem_type = Key[str | None]("subsystem_type", None)
    subsystem_name = Key[str | None]("subsystem_name", None)
    userid = Key[str | None]("userid", None)
    enclave = Key[str | None]("enclave", None)
    policy = Key[int]("policy")
    node = Key[str]("node")
    application_environment = Key[str]("ae")
    state = Key[RequestState]("state", RequestState.QUEUED, STATE_OF.__getitem__)
    deliveries = Key[int]("deliveries", 0)
    exit = Key[str]("exit", "")  # the queue manager's exit URL ('' for none)
    # Its place in its queue (lua/includes/places.lua); None for one queued before places were given. The scripts
    # write the same number as `seq` too, which a version before places sorts requests given back by (its insert
    # numbered them per environment): a rolling upgrade's older replicas keep working on requests the newer queued.
    place = Key[int | None]("place", None)
    inserted = Key[int]("inserted")
    server = Key[str | None]("server", None)  # the holder's connection id, as text
    selected = Key[int | None]("selected", None)
    begun = Key[int | None]("begun", None)
    promoted = Key[bool]("promoted", False)  # this delivery was promoted (no work starved)
    life = Key[int]("life", 1)  # counted up by each retry of a dead letter
    first_inserted = Key[int | None]("first_inserted", None)
    # A work record's: the request's metadata at its end.
    id = Key[str]("id")
    outcome = Key[str]("outcome")
    ended = Key[int]("ended")
    result = Key[str | None]("result", None)  # JSON text
    error = Key[str | None]("error", None)

    @classmethod
    def queued(
        cls,
        *,
        service_class: str,
        report_class: str | None,
        dependent: bool,
        queue_manager: int,
        subsystem_type: str | None,
        subsystem_name: str | None,
        userid: str | None,
        enclave: str | None,
        policy: int,
        node: str,
        application_environment: str,
        exit: str,
    ) -> RequestMeta:
        """A new request's, as the insert writes it (the script adds `place` and `inserted`). A dict display of the keys
        declared above (test_request_meta checks the bytes): building it through `of` cost an insert three times."""
        return cls(
            {
                "sc": service_class,
                "rc": report_class,
                "dep": dependent,
                "qm": queue_manager,
                "subsystem_type": subsystem_type,
                "subsystem_name": subsystem_name,
                "userid": userid,
                "enclave": enclave,
                "policy": policy,
                "node": node,
                "ae": application_environment,
                "state": _QUEUED,
                "deliveries": 0,
                "exit": exit,
            }
        )

    @property
    def server_id(self) -> int | None:
        return int(self.server) if self.server else None


class Enclave(JsonRecord):
    """A transaction's classes, decided once (IWM4ECRE) and given to each of its requests."""

    __slots__ = ()

    service_class = Key[str]("sc")
    report_class = Key[str | None]("rc", None)
    dependent = Key[bool]("dep", False)
    queue_manager = Key[int]("qm")
    policy = Key[int]("policy")
    parent = Key[str | None]("parent", None)


class ExitEntry(JsonRecord):
    """A queue-manager exit call to make for a request the service removed (finish in lua/includes/finish.lua)."""

    __slots__ = ()

    id = Key[str]("id")
    queue_manager = Key[int]("qm")
    exit = Key[str]("exit")
    attempt = Key[int]("attempt", 0)
    record = Key[str]("record")  # the request's work record (JSON)


class RetiredPlace(JsonRecord):
    """Where an environment left from (app/queues/environments.py): its member of the retired hash."""

    __slots__ = ()

    node = Key[str]("node")
    application_environment = Key[str]("ae")
    queue_manager = Key[int]("qm")
