"""Known real data sets: where they are kept and what they must look like.

``DATASETS`` are svmlight files on the LibSVM site (``kind: svmlight``); ``IMAGE_SETS``
are image sets in the original IDX format (``kind: idx``). Neither site publishes
checksums. The first download of a file records its
SHA-256 and size next to it (see :mod:`fedsparse.data.download`); a later
download that differs is flagged.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError

LIBSVM_SITE = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/"


@dataclass(frozen=True)
class DataFile:
    """One file of a data set on the LibSVM site."""

    path: str  # relative to the site's base URL, e.g. "binary/rcv1_train.binary.bz2"
    rows: int  # expected number of rows
    size: int | None = None  # expected compressed size in bytes (None: not known)
    sha256: str | None = None  # expected SHA-256 (None: not known; the first download is recorded)

    @property
    def filename(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def compression(self) -> str:
        if self.filename.endswith(".bz2"):
            return "bz2"
        if self.filename.endswith(".xz"):
            return "xz"
        return "none"


@dataclass(frozen=True)
class DataSet:
    """A registry entry: task, dimension and files (``papers`` names the file the papers used)."""

    name: str
    task: str  # regression | binary | multiclass
    n_features: int
    files: dict[str, DataFile]  # "train", "test"
    papers: str  # key of the file the Fed-HT papers used
    note: str = ""
    classes: int = 0  # a multiclass set's label count (0: binary or regression)
    values_per_row: float | None = None  # mean stored values a row, where known (cost model)

    def file(self, which: str) -> DataFile:
        key = self.papers if which == "papers" else which
        if key not in self.files:
            raise ConfigError(
                f"dataset.file: {self.name} has no {which!r} file "
                f"(known: papers, {', '.join(self.files)})"
            )
        return self.files[key]

    def url(self, which: str, mirror: str | None = None) -> str:
        base = mirror or LIBSVM_SITE
        return base.rstrip("/") + "/" + self.file(which).path


DATASETS: dict[str, DataSet] = {
    d.name: d
    for d in (
        DataSet(
            "E2006-tfidf",
            "regression",
            150_360,
            {
                "train": DataFile("regression/E2006.train.bz2", 16_087),
                "test": DataFile("regression/E2006.test.bz2", 3_308),
            },
            papers="test",
            note="the papers use the 3,308-row test file (linear regression, tau = 200)",
        ),
        DataSet(
            "rcv1.binary",
            "binary",
            47_236,
            {
                "train": DataFile("binary/rcv1_train.binary.bz2", 20_242),
                "test": DataFile("binary/rcv1_test.binary.bz2", 677_399),
            },
            papers="train",
            note="the papers use the 20,242-row training file (logistic regression, tau = 200)",
        ),
        DataSet(
            "mnist",
            "multiclass",
            784,
            {
                "train": DataFile("multiclass/mnist.bz2", 60_000),
                "test": DataFile("multiclass/mnist.t.bz2", 10_000),
            },
            papers="train",
            note="the papers use the 60,000-row training file (softmax, tau = 500 per class)",
            classes=10,
            values_per_row=150,  # about 19 % of the 784 pixels are not zero
        ),
        DataSet(
            "cifar10",
            "multiclass",
            3_072,
            {
                "train": DataFile("multiclass/cifar10.bz2", 50_000),
                "test": DataFile("multiclass/cifar10.t.bz2", 10_000),
            },
            papers="train",
            note="CIFAR-10's 32x32x3 images as 3,072 features (the gradient-sparsification paper)",
            classes=10,
            values_per_row=3_072,  # colour values are almost never exactly zero
        ),
        DataSet(
            "news20.binary",
            "binary",
            1_355_191,
            {"train": DataFile("binary/news20.binary.bz2", 19_996)},
            papers="train",
        ),
        DataSet(
            "real-sim",
            "binary",
            20_958,
            {"train": DataFile("binary/real-sim.bz2", 72_309)},
            papers="train",
        ),
        DataSet(
            "a9a",
            "binary",
            123,
            {"train": DataFile("binary/a9a", 32_561), "test": DataFile("binary/a9a.t", 16_281)},
            papers="train",
        ),
    )
}


def get(name: str) -> DataSet:
    """The registry entry ``name``; ConfigError lists the known names otherwise."""
    try:
        return DATASETS[name]
    except KeyError:
        raise ConfigError(
            f"dataset.source: unknown data set {name!r} (known: {', '.join(DATASETS)})"
        ) from None


# The four files of an IDX image set, as its site names them (each also gzipped, ".gz").
IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


@dataclass(frozen=True)
class ImageSet:
    """A registry entry of an image set in the IDX format (four gzipped files on ``site``)."""

    name: str
    site: str  # base URL of the four files
    rows: dict[str, int]  # "train", "test": expected number of images
    local: tuple[str, ...] = ()  # folders a system package installs the files into
    note: str = ""

    def url(self, filename: str, mirror: str | None = None) -> str:
        return (mirror or self.site).rstrip("/") + "/" + filename


IMAGE_SETS: dict[str, ImageSet] = {
    s.name: s
    for s in (
        ImageSet(
            "fashion-mnist",
            "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
            {"train": 60_000, "test": 10_000},
            local=("/usr/share/datasets/fashion-mnist",),
            note="Debian's package dataset-fashion-mnist installs the four files locally",
        ),
        ImageSet(
            "mnist",
            # yann.lecun.com refuses most downloads; this is the copy torchvision reads
            "https://ossci-datasets.s3.amazonaws.com/mnist/",
            {"train": 60_000, "test": 10_000},
        ),
    )
}


def get_images(name: str) -> ImageSet:
    """The image-set entry ``name``; ConfigError lists the known names otherwise."""
    try:
        return IMAGE_SETS[name]
    except KeyError:
        raise ConfigError(
            f"dataset.source: unknown image data set {name!r} (known: {', '.join(IMAGE_SETS)})"
        ) from None
