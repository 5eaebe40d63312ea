from __future__ import annotations

from pydantic import BaseModel, Field


class SweptQueueOut(BaseModel):
    node: str
    application_environment: str
    service_class: str
    dependent: bool
    in_memory_front: int = Field(description="entries of the front list (selects take from it)")
    in_memory_rear: int = Field(description="entries inserted behind the swept part, waiting to join the front")
    in_database: int = Field(description="requests in blobs in the database")
    blobs: int


class SweeperOut(BaseModel):
    enabled: bool
    interval_s: float
    blob_requests: int
    min_in_memory: int
    queues: list[SweptQueueOut] = Field(description="the queues with a part in the database or a rear list")
