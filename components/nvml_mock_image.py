"""NVIDIA's mock NVML image (mode sim-nvml), built once per stack on this Docker host from a pinned commit.

Upstream publishes `ghcr.io/nvidia/nvml-mock` only from release tags (.github/workflows/nvml-mock-publish.yaml),
and no release carries the pinned commit's fix (see versions.py), so the program builds
`deployments/nvml-mock/Dockerfile` from the git URL at versions.NVML_MOCK_COMMIT and never pushes it; each
tenant's MockNvml loads it into its worker's containerd as the mock-GPU agent's image is loaded in sim.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command

from components import options
from gpu_tenancy.builders.mock_nvml import nvml_mock
from gpu_tenancy.contract import versions


@dataclass
class NvmlMockImageArgs:
    """NVIDIA's mock NVML image, built on this Docker host.

    Attributes:
        commit (str): the NVIDIA/k8s-test-infra commit to build. Default: versions.NVML_MOCK_COMMIT.
    """

    commit: str = versions.NVML_MOCK_COMMIT


class NvmlMockImage(pulumi.ComponentResource):
    image_name: pulumi.Output[str]
    build: command.local.Command

    def __init__(self, name: str, args: NvmlMockImageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:nvml_mock_image:NvmlMockImage", name, {"commit": args.commit}, opts)
        image = nvml_mock.image_name(args.commit)
        # No delete: like the kindest/node image (kept locally), the built image stays on the Docker host as
        # a cache, so a destroyed and redeployed lab does not build it again (`docker image rm` frees it).
        # Another commit is another tag: the trigger builds it, the old one stays until removed.
        # `docker build` writes its progress to stderr; only that is logged, nothing kept in state.
        self.build = command.local.Command(
            f"{name}-build",
            create=nvml_mock.build_script(),
            interpreter=["/bin/sh", "-c"],
            environment={
                "IMAGE": image,
                "CONTEXT": f"{versions.NVML_MOCK_REPOSITORY}#{args.commit}",
                "DOCKERFILE": versions.NVML_MOCK_DOCKERFILE,
            },
            triggers=[image],
            logging=command.local.Logging.STDERR,
            opts=pulumi.ResourceOptions(parent=self, depends_on=options.dependencies(opts)),
        )
        # Known only once built, so everything that loads it waits for the build.
        self.image_name = self.build.id.apply(lambda _: image)
        self.register_outputs({"imageName": self.image_name})
