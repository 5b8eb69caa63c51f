"""The schema as JSON Schema (editors) and as a Markdown reference (README)."""

from __future__ import annotations

from typing import Any

from raytrain.config.schema import SECTIONS, RaytrainConfig


def json_schema() -> dict[str, Any]:
    schema = RaytrainConfig.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "raytrain train config"
    return schema


def _type_name(annotation: Any) -> str:
    text = str(annotation).replace("typing.", "").replace("raytrain.config.schema.", "")
    text = text.replace("NoneType", "").replace("| None", "").replace("Optional[", "").strip(" |")
    for noise in ("Annotated[Union[LinearSchedule, PiecewiseSchedule], FieldInfo(annotation=NoneType, required=True, discriminator='schedule')]",):
        text = text.replace(noise, "schedule")
    return text.replace("Literal", "one of ").replace("<class '", "").replace("'>", "")


def markdown_reference() -> str:
    """A Markdown table per section: key, type, default, meaning."""
    lines = []
    for section, model in SECTIONS.items():
        lines.append(f"### `{section}`\n")
        if model.__doc__:
            lines.append(model.__doc__.strip().splitlines()[0] + "\n")
        lines.append("| key | type | default | meaning |")
        lines.append("|---|---|---|---|")
        for name, f in model.model_fields.items():
            default = "required" if f.is_required() else ("RLlib's" if f.default is None else repr(f.get_default(call_default_factory=True)))
            lines.append(f"| `{f.alias or name}` | `{_type_name(f.annotation)}` | {default} | {f.description or ''} |")
        lines.append("")
    lines.append("### `stop`\n")
    lines.append(RaytrainConfig.model_fields["stop"].description + "\n")
    return "\n".join(lines)
