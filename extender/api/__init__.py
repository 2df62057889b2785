"""The project's types: the extender wire protocol (`wire`), the placement policy (`policy`), the
ZoneRotation record (`rotation`) and the CRD schemas made from them (`schema`). Pydantic models,
the single source of truth for what crosses a boundary; nothing here imports the rest of the
package, and every other layer may import this one."""
