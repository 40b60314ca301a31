"""The schema registry's errors, as Confluent's API reports them (HTTP status and error code). Pure."""

from __future__ import annotations


class RegistryError(Exception):
    """A request the registry refuses: ``status`` is the HTTP status, ``code`` Confluent's
    ``error_code``, ``message`` its text."""

    status = 500
    code = 50001

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidSchema(RegistryError):
    """The schema text does not parse as a schema of its kind (Confluent's 42201)."""

    status = 422
    code = 42201


class SubjectNotFound(RegistryError):
    status, code = 404, 40401

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' not found.")


class VersionNotFound(RegistryError):
    status, code = 404, 40402

    def __init__(self, version: object) -> None:
        super().__init__(f"Version {version} not found.")


class SchemaNotFound(RegistryError):
    status, code = 404, 40403

    def __init__(self, schema_id: object = None) -> None:
        super().__init__(
            "Schema not found" if schema_id is None else f"Schema {schema_id} not found"
        )


class SubjectSoftDeleted(RegistryError):
    status, code = 404, 40404

    def __init__(self, subject: str) -> None:
        super().__init__(
            f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
        )


class SubjectNotSoftDeleted(RegistryError):
    status, code = 404, 40405

    def __init__(self, subject: str) -> None:
        super().__init__(
            f"Subject '{subject}' was not deleted first before being permanently deleted"
        )


class VersionSoftDeleted(RegistryError):
    status, code = 404, 40406

    def __init__(self, subject: str, version: int) -> None:
        super().__init__(
            f"Subject '{subject}' Version {version} was soft deleted."
            "Set permanent=true to delete permanently"
        )


class VersionNotSoftDeleted(RegistryError):
    status, code = 404, 40407

    def __init__(self, subject: str, version: int) -> None:
        super().__init__(
            f"Subject '{subject}' Version {version} was not deleted first before being "
            "permanently deleted"
        )


class SubjectLevelNotConfigured(RegistryError):
    status, code = 404, 40408

    def __init__(self, subject: str, what: str = "compatibility") -> None:
        super().__init__(f"Subject '{subject}' does not have subject-level {what} configured")
        if what == "mode":
            self.code = 40409


class IncompatibleSchema(RegistryError):
    """Confluent answers 409 with error code 409 for an incompatible schema."""

    status, code = 409, 409

    def __init__(self, subject: str, problems: list[str]) -> None:
        super().__init__(
            f'Schema being registered is incompatible with an earlier schema for subject "'
            f'{subject}", details: [{", ".join(problems)}]'
        )
        self.problems = problems


class InvalidVersion(RegistryError):
    status, code = 422, 42202

    def __init__(self, version: object) -> None:
        super().__init__(
            f"The specified version '{version}' is not a valid version id. Allowed values are "
            'between [1, 2^31-1] and the string "latest"'
        )


class InvalidCompatibilityLevel(RegistryError):
    status, code = 422, 42203

    def __init__(self) -> None:
        super().__init__(
            "Invalid compatibility level. Valid values are none, backward, forward, full, "
            "backward_transitive, forward_transitive, and full_transitive"
        )


class InvalidMode(RegistryError):
    status, code = 422, 42204

    def __init__(self) -> None:
        super().__init__("Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD.")


class OperationNotPermitted(RegistryError):
    status, code = 422, 42205


class ReferenceExists(RegistryError):
    status, code = 422, 42206


class SchemaTooLarge(RegistryError):
    status, code = 422, 42209


class InvalidRequest(RegistryError):
    """A body that is not what the route takes (Confluent answers Jersey's 422 here)."""

    status, code = 422, 422


class StoreUnavailable(RegistryError):
    """The registry's topic could not be written or read in time."""

    status, code = 500, 50001


class OperationTimedOut(RegistryError):
    status, code = 500, 50002
