"""What every algorithm is: declared hyperparameters, ``setup`` and ``round``.

An algorithm owns all of its state (global model, per-client models, server
state, random streams), so families with personalised models, edge servers or
server-side selection fit the same three methods. ``round`` returns what was
communicated, so accounting is the algorithm's own statement of what it sends.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..defaults import DEFAULT_TIME_MODEL
from ..errors import ConfigError, did_you_mean
from ..work import RunWork

if TYPE_CHECKING:  # the problem (and with it the kernels) is imported where a run starts
    from ..objective.problem import Problem

DENSE_VALUE_BYTES = 8  # float64
SPARSE_ENTRY_BYTES = 12  # float64 value + int32 index


def dense_bytes(n_values: int) -> int:
    """Bytes to send ``n_values`` numbers as a dense vector."""
    return DENSE_VALUE_BYTES * int(n_values)


def sparse_bytes(nnz: int) -> int:
    """Bytes to send a sparse vector with ``nnz`` non-zeros (value + index each)."""
    return SPARSE_ENTRY_BYTES * int(nnz)


BITS_PER_VALUE = 64  # the sFedHP paper's Remark 1: a value is 64 bits


def vector_bytes(nnz: int, d: int) -> int:
    """Bytes of a vector of length ``d`` with ``nnz`` non-zeros, sent dense or sparse."""
    return min(dense_bytes(d), sparse_bytes(nnz))


def vector_bits(nnz: int, d: int) -> int:
    """Remark 1: 64 bits per non-zero plus a d-bit location map, or 64 d sent dense."""
    return min(BITS_PER_VALUE * int(nnz) + int(d), BITS_PER_VALUE * int(d))


def count_nonzero(models: np.ndarray, tol: float) -> np.ndarray:
    """Non-zeros (|x| > tol) of each model of a stack (n, ...)."""
    from ..kernels import nnz_above  # lazily: planning a sweep loads no kernels

    return nnz_above(np.ascontiguousarray(models).reshape(models.shape[0], -1), float(tol))


_REQUIRED = object()


@dataclass(frozen=True)
class Hyperparameter:
    """A declared hyperparameter: type, default, valid range and a one-line doc.

    ``kind`` is ``int``, ``float`` or ``str``. ``full_ok`` lets an int take the
    string ``"full"`` (stored as None: the whole local data set).
    """

    name: str
    kind: type
    doc: str
    default: Any = _REQUIRED
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # True: value must be > low, else >= low
    choices: tuple[str, ...] | None = None
    full_ok: bool = False
    # True for a hyperparameter added to an algorithm after runs of it existed: at its
    # default it stays out of the canonical params (and so out of the run id).
    omit_default: bool = False
    # how figures and labels write it (e.g. "λ1"); "" for its name
    symbol: str = ""
    # True: a configuration's label leaves it out at its default (a setting most runs keep)
    label_omits_default: bool = False

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def validate(self, value: Any, where: str) -> Any:
        """Return ``value`` normalised, or raise ConfigError naming ``where``."""
        if self.full_ok and value in ("full", None):
            return None
        if self.kind is str:
            if not isinstance(value, str) or (self.choices and value not in self.choices):
                what = f"one of {', '.join(self.choices)}" if self.choices else "a string"
                raise ConfigError(f"{where}: must be {what}, got {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            extra = " or 'full'" if self.full_ok else ""
            raise ConfigError(f"{where}: must be a number{extra}, got {value!r}")
        if self.kind is int:
            # float inf/nan would make int() raise OverflowError/ValueError
            if isinstance(value, float) and not (np.isfinite(value) and value.is_integer()):
                raise ConfigError(f"{where}: must be an integer, got {value!r}")
            value = int(value)
        else:
            try:
                value = float(value)
            except OverflowError:  # an int beyond the float range
                value = float("inf")
            if not np.isfinite(value):
                raise ConfigError(f"{where}: must be finite, got {value!r}")
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            op = ">" if self.low_open else ">="
            raise ConfigError(f"{where}: must be {op} {self.low:g}, got {value!r}")
        if self.high is not None and value > self.high:
            raise ConfigError(f"{where}: must be <= {self.high:g}, got {value!r}")
        return value


@dataclass(frozen=True)
class Column:
    """A trace column an algorithm reports itself (a key of :meth:`Algorithm.extra_metrics`
    or :meth:`Algorithm.finish_metrics`): ``kind`` ``int``, ``float`` or ``str`` (int64,
    float64, string in Parquet), null in the rows of algorithms that do not report it."""

    name: str
    kind: type
    doc: str


@dataclass
class RoundCost:
    """What one round cost: bytes sent up (clients to server) and down, summed over
    clients, and the local iterations each client ran.

    ``values_up``/``values_down``: numbers one client sends up / receives (the mean over
    clients; an index counts as one value), which the time model charges. None: derived
    from the bytes at 8 bytes a value (right for dense messages; sparse senders report).
    """

    bytes_up: int
    bytes_down: int
    local_iterations: int
    values_up: float | None = None
    values_down: float | None = None

    def values(self, n_clients: int) -> tuple[float, float]:
        """(values up, values down) of one client this round."""
        up, down = self.values_up, self.values_down
        if up is None:
            up = self.bytes_up / (n_clients * DENSE_VALUE_BYTES)
        if down is None:
            down = self.bytes_down / (n_clients * DENSE_VALUE_BYTES)
        return float(up), float(down)


class Algorithm(ABC):
    """Base class: subclasses declare ``name`` and ``hyperparameters`` and implement
    ``setup``, ``round`` and ``model``.

    The declarations are all the rest of fedsparse reads about an algorithm (the registry,
    ``fedsparse.algorithms.registry``, collects them): its hyperparameters are the results'
    typed columns, ``trace_columns`` the trace columns it reports itself, ``family`` its
    heading in docs/configuration.md, ``label``, ``colour`` and ``report_order`` how the report
    shows it."""

    name: ClassVar[str]
    summary: ClassVar[str]
    hyperparameters: ClassVar[tuple[Hyperparameter, ...]]
    trace_columns: ClassVar[tuple[Column, ...]] = ()
    family: ClassVar[str] = ""
    label: ClassVar[str] = ""  # "" for its name
    colour: ClassVar[str] = ""  # a matplotlib colour; "" for one of the report's spare colours
    # where the report lists it: the algorithms with a report_order first, by it (e.g. a family's
    # baseline before its methods); None: after them, by name
    report_order: ClassVar[int | None] = None
    # a configuration's label on the report's shared pages (runs, fronts), e.g. "γ=0.01, K=5":
    # these hyperparameters in this order, each as (name, symbol); None: every declared one, in
    # declaration order, by its symbol (or name)
    config_label: ClassVar[tuple[tuple[str, str], ...] | None] = None
    # True: the shared pages show it by its name and a spare colour, as they did before it declared
    # a label and colour, which only its family's page uses (the reports stay as they were)
    shared_pages_by_name: ClassVar[bool] = False
    # The version of the numerics of its traces: raised by a change that alters a trace's bits
    # (an order of operations, a kernel), so a results folder never takes a run stored by the
    # earlier numerics for finished (fedsparse.results.numerics); one per model path ({"linear": 2,
    # "network": 1}) when the change touched one path's kernels only
    numerics: ClassVar[int | Mapping[str, int]] = 1
    # the run's time model; run_trace sets it before setup (never mutated in place)
    time_model: dict[str, float] = DEFAULT_TIME_MODEL

    def __init__(self, problem: Problem, params: dict[str, Any], seed: int):
        self.problem = problem
        self.params = params
        self.seed = seed

    @classmethod
    def validate_params(cls, params: dict[str, Any], where: str = "params") -> dict[str, Any]:
        """Check ``params`` against the declarations; fill defaults; raise ConfigError."""
        if not isinstance(params, dict):
            raise ConfigError(f"{where}: must be a mapping, got {params!r}")
        declared = {h.name: h for h in cls.hyperparameters}
        for key in params:
            if key not in declared:
                raise ConfigError(
                    f"{where}.{key}: unknown hyperparameter for {cls.name}"
                    f"{did_you_mean(key, declared)} "
                    f"(known: {', '.join(declared)})"
                )
        out = {}
        for h in cls.hyperparameters:
            if h.name in params:
                value = h.validate(params[h.name], f"{where}.{h.name}")
                if not (h.omit_default and value == h.default):
                    out[h.name] = value
            elif h.omit_default:
                continue
            elif h.required:
                raise ConfigError(f"{where}.{h.name}: required by {cls.name}")
            else:
                out[h.name] = h.default
        return out

    @classmethod
    def canonical_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Validated ``params`` in the form that identifies the run, for an algorithm whose
        params name something outside the config (e.g. a recorded run to replay): read and
        check it here, where the config is normalised, so a bad source fails the config and
        not a job later. The default: ``params`` as they are."""
        return params

    @classmethod
    def resolved_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Canonical ``params`` as the algorithm is built with them (where a run is built): what
        :meth:`canonical_params` names, read, so the algorithm itself reads no files. The
        default: ``params`` as they are."""
        return params

    @classmethod
    def with_defaults(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Validated ``params`` with the defaults that the canonical form leaves out."""
        return {
            **{h.name: h.default for h in cls.hyperparameters if h.omit_default},
            **params,
        }

    def param(self, name: str) -> Any:
        """A hyperparameter's value, its default where the canonical params omit it."""
        return self.with_defaults(self.params)[name]

    def check_problem(self, where: str = "params") -> None:
        """Raise ConfigError if the hyperparameters cannot apply to this problem."""
        return None

    def client_summary(self) -> dict[str, np.ndarray] | None:
        """Per-client totals over the rounds trained (equal-length columns, one row per client,
        e.g. what each client contributed), stored with the run in runs.parquet's
        ``client_summary``; None (the default) for algorithms that keep none."""
        return None

    @classmethod
    def check_clients(cls, params: dict[str, Any], n_clients: int, where: str = "params") -> None:
        """Raise ConfigError if the hyperparameters cannot apply to ``n_clients`` clients.
        Called while planning wherever the config fixes the client count, so a sweep fails
        before it starts rather than in its runs."""
        return None

    @classmethod
    def reads_time_model(cls, params: dict[str, Any]) -> bool:
        """Whether runs with these hyperparameters read ``time_model`` (e.g. a controller
        charging simulated time). False (the default): the trajectory does not depend on it,
        so runs differing only in their time model share one computation."""
        return False

    @classmethod
    def fusable(cls, params: dict[str, Any]) -> tuple[str, ...]:
        """Hyperparameters whose values may differ between the members of a cohort: runs
        equal in everything else (data, model, seed, rounds, the other hyperparameters) are
        computed together, each round one :meth:`cohort_round` for all of them
        (fedsparse.cohort). () (the default): every run computes alone."""
        return ()

    @classmethod
    def cohort_round(cls, members: list[Algorithm], t: int) -> list[RoundCost]:
        """Round ``t`` of each member of a cohort (instances of this class, set up, equal
        but for :meth:`fusable` hyperparameters, in the order given; a member that diverged
        has left the list). Each member's state and cost must be bit for bit what its own
        :meth:`round` gives, so a run's trace does not depend on its cohort: a fused
        implementation shares the data passes (a minibatch's rows read once for every
        member) and keeps each member's operations in the same order as a cohort of one.
        The default: the members' rounds one after another. A run alone is stepped by its
        own :meth:`round`; a subclass that changes ``round`` of a family that fuses must
        change ``cohort_round`` too, or declare nothing fusable."""
        return [member.round(t) for member in members]

    @classmethod
    def model_support(cls, params: dict[str, Any]) -> int | None:
        """Non-zeros per class the global model keeps, where the algorithm bounds them (hard
        thresholding's τ); None: a dense model. The cost model charges an exact evaluation
        that many columns rather than every one (fedsparse.sweep.cost.run_work)."""
        return None

    @classmethod
    def steps_per_round(cls, params: dict[str, Any]) -> int:
        """Minibatch gradients one client computes per round, for the cost estimate."""
        return int(params.get("local_steps", 1))

    @classmethod
    def work(cls, params: dict[str, Any]) -> RunWork:
        """What a round of a run with these hyperparameters does, for the cost model
        (:class:`fedsparse.sweep.cost.RunWork`): by default every client takes
        :meth:`steps_per_round` steps, the model keeps :meth:`model_support` non-zeros per
        class, and a client holds its local model and the broadcast one. An algorithm that
        does more (selections, prox terms, personal models) or less (sampled clients) says
        so here."""
        return RunWork(int(cls.steps_per_round(params)), cls.model_support(params))

    @abstractmethod
    def setup(self) -> None:
        """Allocate state; the model starts at x_0."""

    @abstractmethod
    def round(self, t: int) -> RoundCost:
        """Run communication round ``t`` (0-based) and report what it sent."""

    @property
    @abstractmethod
    def model(self) -> np.ndarray:
        """The global model W, shape ``problem.shape``, that is evaluated."""

    def extra_metrics(self) -> dict[str, Any]:
        """Trace columns the algorithm itself reports (e.g. ``k_used``), read when a round is
        evaluated (and for round 0); keys must be declared in ``trace_columns``."""
        return {}

    def finish_metrics(self, row: dict[str, Any]) -> dict[str, Any]:
        """Columns computed from a scored row (the problem's metrics and this round's
        :meth:`extra_metrics`) that add to or replace the problem's, e.g. an objective with
        a term of the algorithm's own (divergence is judged on the problem's objective)."""
        return {}

    def checkpoint_state(self) -> dict[str, Any]:
        """The state a checkpoint keeps (fedsparse.results.checkpoint), as of the end of a round:
        every attribute but the problem, the time model (the run's, set again when it resumes) and
        work spaces (``ThreadWork``: scratch that :meth:`setup` makes again). Objects the
        members of a cohort share stay shared (one pickle holds them all). A family overrides
        this, and :meth:`restore_state`, for state an attribute copy loses (e.g. a view of
        another attribute: a pickle makes it an array of its own)."""
        from ..objective.problem import ThreadWork

        state = {
            name: value
            for name, value in vars(self).items()
            if name not in ("problem", "time_model") and not isinstance(value, ThreadWork)
        }
        # A cohort's stack (the attribute ``stack`` by convention, e.g. LocalSGDStack), whose
        # views its members' arrays are: a pickle would part them, so it is saved as None and
        # the next fused round stacks the restored arrays again (members restored from one
        # pickle share their random streams as before).
        if "stack" in state:
            state["stack"] = None
        return state

    def restore_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`checkpoint_state`'s ``state``, instead of :meth:`setup`, in a
        fresh instance built as the checkpointed one was: set up, then the state put back."""
        self.setup()
        vars(self).update(state)

    @property
    def personal_models(self) -> np.ndarray | None:
        """Per-client (personalised) models, shape (n_clients, *problem.shape), scored on
        each client's own rows (the trace's ``pm_*`` columns); None: the algorithm has none."""
        return None
