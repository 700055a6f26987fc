"""The schema registry's errors: Confluent's error codes, HTTP statuses and messages.

Every error is a :class:`~moldau.http.HttpError`, so the HTTP layer answers it as
``{"error_code": ..., "message": ...}``. Codes and message shapes follow Confluent's
``Errors.java`` and its ``Rest*Exception`` classes; clients interpret the codes
(confluent-kafka raises ``SchemaRegistryError`` with ``error_code``).

One deliberate difference from Confluent's newest releases: an incompatible schema answers
HTTP 409 with error code 409 (Confluent 7.x and what confluent-kafka's tests expect), not
40901.
"""

from __future__ import annotations

from moldau.http import HttpError

SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
SCHEMA_VERSION_SOFT_DELETED = 40406
SCHEMA_VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_MODE_NOT_CONFIGURED = 40409
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
ID_DOES_NOT_MATCH = 42207
INVALID_SUBJECT = 42208
SCHEMA_TOO_LARGE = 42209
STORE_ERROR = 50001
OPERATION_TIMEOUT = 50002
REQUEST_FORWARDING_FAILED = 50003
UNKNOWN_LEADER = 50004


class RegistryError(HttpError):
    """A schema registry error; the HTTP status follows from the code (40401 -> 404 ...)."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(_status(error_code), error_code, message)


def _status(code: int) -> int:
    return code if code < 1000 else code // 100


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def version_not_found(version: int) -> RegistryError:
    return RegistryError(VERSION_NOT_FOUND, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    if schema_id is None:
        return RegistryError(SCHEMA_NOT_FOUND, "Schema not found")
    return RegistryError(SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(SUBJECT_SOFT_DELETED, f"Subject '{subject}' was soft deleted. "
                         "Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(SUBJECT_NOT_SOFT_DELETED, f"Subject '{subject}' was not deleted "
                         "first before being permanently deleted")


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(SCHEMA_VERSION_SOFT_DELETED, f"Subject '{subject}' Version "
                         f"{version} was soft deleted. Set permanent=true to delete permanently")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(SCHEMA_VERSION_NOT_SOFT_DELETED, f"Subject '{subject}' Version "
                         f"{version} was not deleted first before being permanently deleted")


def compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                         f"Subject '{subject}' does not have subject-level compatibility "
                         "configured")


def mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(SUBJECT_MODE_NOT_CONFIGURED,
                         f"Subject '{subject}' does not have subject-level mode configured")


def incompatible(subject: str, messages: list[str]) -> RegistryError:
    detail = "[" + ", ".join(messages) + "]"
    return RegistryError(INCOMPATIBLE_SCHEMA, "Schema being registered is incompatible with "
                         f'an earlier schema for subject "{subject}", details: {detail}')


def invalid_schema(reason: str) -> RegistryError:
    return RegistryError(INVALID_SCHEMA, f"Invalid schema: {reason}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(INVALID_VERSION, f"The specified version '{version}' is not a valid "
                         "version id. Allowed values are between [1, 2^31-1] and the string "
                         '"latest"')


def invalid_compatibility() -> RegistryError:
    return RegistryError(INVALID_COMPATIBILITY_LEVEL, "Invalid compatibility level. Valid "
                         "values are none, backward, forward, full, backward_transitive, "
                         "forward_transitive, and full_transitive")


def invalid_mode(detail: str = "") -> RegistryError:
    return RegistryError(INVALID_MODE, detail or "Invalid mode. Valid values are READWRITE, "
                         "READONLY, READONLY_OVERRIDE and IMPORT.")


def not_permitted(message: str) -> RegistryError:
    return RegistryError(OPERATION_NOT_PERMITTED, message)


def reference_exists(subject: str, version: int) -> RegistryError:
    return RegistryError(REFERENCE_EXISTS, "One or more references exist to the schema "
                         f"{{magic=1,keytype=SCHEMA,subject={subject},version={version}}}.")


def invalid_subject(subject: str) -> RegistryError:
    return RegistryError(INVALID_SUBJECT, f"The specified subject '{subject}' is not valid.")


def store_error(message: str) -> RegistryError:
    return RegistryError(STORE_ERROR, message)


def timeout(message: str) -> RegistryError:
    return RegistryError(OPERATION_TIMEOUT, message)


def forwarding_failed(message: str) -> RegistryError:
    return RegistryError(REQUEST_FORWARDING_FAILED, message)


def unknown_leader(message: str = "Leader not known.") -> RegistryError:
    return RegistryError(UNKNOWN_LEADER, message)
