"""The `sampler:` section: one typed settings class per sampler, chosen by its `name`.

Each sampler's module defines its settings class (a subclass of `SampledSettings`) with its own
defaults and capability flags, and registers it with the sampler in one call
(`training.samplers.register_sampler`), which adds it to `SETTINGS`. A config's `sampler:`
mapping is validated by `validate_sampler` against the class its `name` picks, so a sampler
registered later (a plugin) is as valid as the built-in ones (`training.config` registers those
first). `FullSoftmax` is the one kind that draws nothing; `AutoSampler` (the default) is no
sampler but a choice between the full softmax and `SAMPLED_DEFAULT` by catalogue size, made
once the catalogue is known (`RecsysConfig.for_catalogue`). Torch-free: the CLI reads this at
start-up.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from model.section import Section, settings_name, validate_named

# the sampler of a `sampler:` section that names none: the full softmax on small catalogues,
# SAMPLED_DEFAULT on larger ones (`AutoSampler`)
DEFAULT_SAMPLER = "auto"
# the sampler `auto` picks above `full_up_to` items: above uniform on validation on both
# datasets with its own default m (docs/benchmarks/recipe-study.md, the final grid)
SAMPLED_DEFAULT = "midx"
# the largest catalogue `auto` trains with the full softmax: up to it a full-softmax step of the
# default model costs no more than a midx one on this machine, and the full softmax leads midx
# on both datasets' validation (docs/benchmarks/default-sampler.md)
FULL_SOFTMAX_UP_TO = 16_000


class SamplerSettings(Section):
    """What every sampler's settings say about it: its name and its capability flags.

    Class attributes (not config keys):
        positives_as_negatives: Its negatives include the batch's positives (noise that is
            not independent of them).
        unit_kernel: Its kernel follows the softmax on L2-normalised towers only.
        inclusion_probability: `log_q` is log b, the probability that an id is in the draw
            (a set), not the log of an expected count of draws with repeats.
        pairs_with: What `--sampler NAME` sets in other sections (`{"loss": {"name": ...}}`),
            before the config files and `--set` overrides.
        own_temperature: The key giving the sampler a temperature of its own, when
            `fixes_the_temperature` can be true (None: there is no such key).

    """

    name: str
    positives_as_negatives: ClassVar[bool] = False
    unit_kernel: ClassVar[bool] = False
    inclusion_probability: ClassVar[bool] = False
    pairs_with: ClassVar[dict[str, dict[str, Any]]] = {}
    own_temperature: ClassVar[str | None] = None

    def fixes_the_temperature(self) -> bool:
        """Whether the sampler is built on the model's starting temperature (and keeps it)."""
        return False

    def reports_log_q(self) -> bool:
        """Whether the negatives carry a `log_q` (tapas with `correction: none` does not)."""
        return True


class FullSoftmax(SamplerSettings):
    """The full softmax over every item: no sampler, no negatives drawn."""

    name: Literal["full"] = "full"


class SampledSettings(SamplerSettings):
    """Settings of a sampler that draws negatives.

    Class attribute `uses_num_negatives`: False when the draw's size is not `num_negatives`
    (in-batch: the batch's positives).
    """

    num_negatives: int = Field(256, ge=1, description="m negatives per batch, or per query.")
    uses_num_negatives: ClassVar[bool] = True


class PerQueryDraws(SampledSettings):
    """A sampler that can draw each query's own negatives."""

    per_query: bool = Field(False, description="Per-query negatives [N, m] instead of [m].")


class PerSequenceDraws(PerQueryDraws):
    """A sampler drawing per query by default, whose draws a history's positions may share."""

    per_query: bool = Field(True, description="Per-query negatives [N, m] instead of [m].")
    per_sequence: bool = Field(
        False,
        description="With per_query: m draws per history, shared by its positions, from a "
        "mixture of their proposals (the kernel trees weigh each by its kernel's mass); each "
        "logit corrected by that mixture's log q.",
    )

    @model_validator(mode="after")
    def _sequences_share_per_query_draws(self) -> PerSequenceDraws:
        if self.per_sequence and not self.per_query:
            raise ValueError(
                "per_sequence shares per-query draws by history: it needs per_query: true"
            )
        return self


class TracksTheTable(SampledSettings):
    """A sampler that keeps a copy of the item table, patched each step, rebuilt periodically.

    `refits_sparse` (a class attribute, or a property where the settings decide it): its state
    holds what the step's updates cannot keep current (midx's codebooks), so it is rebuilt every
    `refresh_every` steps with sparse tables too; the others are rebuilt only with dense Adam,
    which moves every row.
    """

    refits_sparse: ClassVar[bool] = False

    refresh_every: int = Field(
        100,
        ge=1,
        description="Full rebuild every N steps (with sparse tables, only a sampler that refits).",
    )


class AutoSampler(SamplerSettings):
    """The default: the full softmax up to `full_up_to` items, `midx` at its defaults above.

    No sampler is built from it: `pick` replaces it by the settings it chooses for a catalogue
    (`SAMPLED_DEFAULT` names the sampled one).
    """

    name: Literal["auto"] = "auto"
    full_up_to: int = Field(
        FULL_SOFTMAX_UP_TO,
        ge=0,
        description=f"The full softmax on a catalogue of at most this many items, above it "
        f"{SAMPLED_DEFAULT} at its defaults (`sampler.name={SAMPLED_DEFAULT}` tunes it; "
        "0: always sampled).",
    )

    def pick(self, num_items: int) -> FullSoftmax | SampledSettings:
        """The settings trained on a catalogue of `num_items` items."""
        if num_items <= self.full_up_to:
            return FullSoftmax()
        chosen = validate_sampler({"name": SAMPLED_DEFAULT})
        assert isinstance(chosen, SampledSettings)  # a sampler that draws
        return chosen

    def picks(self) -> dict[str, FullSoftmax | SampledSettings]:
        """What it may train, by the catalogues it trains it on (one entry when 0 items)."""
        above = f"more than {self.full_up_to:,} items"
        if self.full_up_to == 0:
            return {above: self.pick(1)}
        return {f"at most {self.full_up_to:,} items": FullSoftmax(), above: self.pick(2**62)}

    def fixes_the_temperature(self) -> bool:
        """Whether one of its picks is built on the model's starting temperature."""
        return any(pick.fixes_the_temperature() for pick in self.picks().values())


AnySampler = FullSoftmax | SampledSettings | AutoSampler  # what `RecsysConfig.sampler` holds


SETTINGS: dict[str, type[AnySampler]] = {
    settings_name(AutoSampler): AutoSampler,
    settings_name(FullSoftmax): FullSoftmax,
}


def register_settings(settings: type[SampledSettings]) -> str:
    """Add `settings` to `SETTINGS` under its name; returns the name."""
    name = settings_name(settings)
    if name in SETTINGS:
        raise ValueError(f"sampler {name!r} registered twice")
    SETTINGS[name] = settings
    return name


def settings_class(name: Any) -> type[AnySampler] | None:
    """The settings class registered under `name` (None: no such sampler)."""
    return SETTINGS.get(name) if isinstance(name, str) else None


def validate_sampler(value: Any) -> AnySampler:
    """The settings class `value["name"]` picks, validated; unknown names and keys refused.

    Raises:
        ValidationError: at `name` for an unknown sampler (the message lists the known ones),
            at a key the chosen sampler does not have (the message lists its keys).

    """
    return validate_named(value, SETTINGS, "sampler", DEFAULT_SAMPLER)
