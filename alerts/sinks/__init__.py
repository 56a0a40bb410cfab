"""Alert sinks, one per module: structured log lines, a generic webhook, Alertmanager API v2."""

from alerts.sinks.alertmanager import AlertmanagerSink
from alerts.sinks.base import RejectedError, Sink
from alerts.sinks.log import LogSink
from alerts.sinks.webhook import WebhookSink

__all__ = ["Sink", "RejectedError", "LogSink", "WebhookSink", "AlertmanagerSink"]
