"""The GUI task sets' converters (WebVoyager, Online-Mind2Web, OSWorld), run by `envs.gui.importing`."""
