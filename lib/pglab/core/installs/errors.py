"""What can go wrong getting a PostgreSQL install, one exception each; every module of the chain raises these."""


class InstallError(Exception):
    """No usable install: not found, not downloadable or not buildable here (the message says why)."""


class BuildError(InstallError):
    """A source build failed or cannot run on this machine."""


class DownloadError(InstallError):
    """A download from the package registry failed or was refused."""


class UnpackError(Exception):
    """A package archive that would write outside its folder, or is not what it claims."""
